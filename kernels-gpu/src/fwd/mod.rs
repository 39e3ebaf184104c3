//! The forward pass, one main loop per kernel family: [`sm80`] (`mma.sync`, `ldmatrix`,
//! `cp.async`; sm_80 PTX) and [`sm90`] (Hopper's `wgmma`; sm_90a PTX), and the tile
//! copies both issue ([`copy`]).

pub mod copy;
pub mod sm80;
pub mod sm90;
