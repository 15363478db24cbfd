//! The status queries: each actor's snapshot, the supervisor's for the whole service, the
//! monitor's overview.

use actix::prelude::*;

use crate::actors::status::{CheckpointStatus, Overview, PartitionStatus, ServiceStatus};

/// A partition actor's snapshot.
#[derive(Message)]
#[rtype(result = "PartitionStatus")]
pub struct GetPartitionStatus;

/// The checkpoint's per-partition snapshot.
#[derive(Message)]
#[rtype(result = "Vec<CheckpointStatus>")]
pub struct GetCheckpointStatus;

/// The monitor's overview: the service's snapshot with stuck states, lag in seconds and trends.
#[derive(Message)]
#[rtype(result = "Option<Overview>")]
pub struct GetOverview;

/// The whole service's snapshot (the supervisor asks the others).
#[derive(Message)]
#[rtype(result = "ServiceStatus")]
pub struct GetStatus;
