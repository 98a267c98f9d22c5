//! The conversation engine: the seed's graph as explicit Rust. A worker claims a conversation,
//! `context_extractor` loads its state, `route_to_workflow` picks the node from the persisted
//! `dialog_state`, assistants run (delegating with `To<X>Assistant`, returning with
//! `CompleteOrEscalate`), and every node's effect is stored before the next one runs.

