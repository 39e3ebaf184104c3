//! Shard 0 of the forward kernel's PTX entries: every configuration that
//! `for_each_kernel_entry_of_shard!(Sm80, 0, ..)` lists, defined by `forward_entries!`.
#![no_std]
#![feature(abi_ptx)]

use flash_attn_kernels::forward_entries;

flash_attn_params::for_each_kernel_entry_of_shard!(Sm80, 0, forward_entries);
