//! The attention parts that a main loop shares with the next one (a Hopper wgmma loop will sit
//! beside the sm80 one): the block's sequence information ([`block_info`]), the mask
//! ([`mask`]), the score modifiers ([`modifiers`]: softcap, ALiBi), the online softmax
//! ([`softmax`]), the epilogue ([`epilogue`]) and split-KV's partials and combine ([`split`]).

pub mod block_info;
pub mod epilogue;
pub mod mask;
pub mod modifiers;
pub mod softmax;
pub mod split;
