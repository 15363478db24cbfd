//! The status queries: each actor's snapshot, the supervisor's for the whole service, the
//! monitor's overview.

use actix::prelude::*;

use crate::actors::status::{
    BacklogDetail, CheckpointStatus, Overview, PartitionStatus, ServiceStatus,
};

/// A partition actor's snapshot, its Unknown backlog copied to the detail asked for.
#[derive(Message)]
#[rtype(result = "PartitionStatus")]
pub struct GetPartitionStatus(pub BacklogDetail);

/// The checkpoint's per-partition snapshot.
#[derive(Message)]
#[rtype(result = "Vec<CheckpointStatus>")]
pub struct GetCheckpointStatus;

/// The monitor's overview: the service's snapshot with stuck states, lag in seconds and trends,
/// each partition's Unknown backlog copied to the detail asked for.
#[derive(Message)]
#[rtype(result = "Option<Overview>")]
pub struct GetOverview(pub BacklogDetail);

/// The whole service's snapshot (the supervisor asks the others), every partition's Unknown
/// backlog entry by entry.
#[derive(Message)]
#[rtype(result = "ServiceStatus")]
pub struct GetStatus;

/// The same snapshot with each partition's Unknown backlog summarised
/// ([`BacklogDetail::Summary`]): for what asks often and needs no entries (the monitor's
/// sample every second, readiness probes).
#[derive(Message)]
#[rtype(result = "ServiceStatus")]
pub struct SampleStatus;
