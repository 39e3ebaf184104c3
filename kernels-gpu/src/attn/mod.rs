//! The attention parts that a main loop shares with the next one (a Hopper wgmma loop will sit
//! beside the sm80 one): the mask ([`mask`]) and the online softmax ([`softmax`]).

pub mod mask;
pub mod softmax;
