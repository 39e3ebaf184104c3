//! The attention parts that a main loop shares with the next one (a Hopper wgmma loop will sit
//! beside the sm80 one): the block's sequence information ([`block_info`]), the mask
//! ([`mask`]), the online softmax ([`softmax`]) and the epilogue ([`epilogue`]).

pub mod block_info;
pub mod epilogue;
pub mod mask;
pub mod softmax;
