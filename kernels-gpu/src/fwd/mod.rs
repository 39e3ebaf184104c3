//! The forward pass, one main loop per architecture: [`sm80`] (`mma.sync`, `ldmatrix`,
//! `cp.async`).

pub mod copy;
pub mod sm80;
pub mod sm90;
