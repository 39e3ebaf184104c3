//! The attention parts that the main loops share (the sm80 `mma.sync` loop and, for the dense
//! problem, the sm90 `wgmma` one): the block's sequence information ([`block_info`]), the mask
//! ([`mask`]), the score modifiers ([`modifiers`]: softcap, ALiBi), the online softmax
//! ([`softmax`]), the epilogue ([`epilogue`]) and split-KV's partials and combine ([`split`]).

pub mod block_info;
pub mod epilogue;
pub mod mask;
pub mod modifiers;
pub mod softmax;
pub mod split;
