//! The actors of the consumer runtime: a supervisor that follows the group's assignment, one
//! partition actor per assigned partition, and a checkpoint actor that commits watermarks.
//!
//! The protocol between them (and the Kafka driver thread) is in [`messages`]; the snapshots
//! they describe themselves with are in [`status`].

pub mod checkpoint;
pub mod messages;
pub mod monitor;
pub mod partition;
pub mod status;
pub mod supervisor;

pub use checkpoint::Checkpoint;
pub use monitor::Monitor;
pub use partition::PartitionActor;
pub use supervisor::Supervisor;
