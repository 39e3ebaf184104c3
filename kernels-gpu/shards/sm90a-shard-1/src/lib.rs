//! Shard 1 of the sm90 family's PTX entries: every configuration that
//! `for_each_kernel_entry_of_shard!(Sm90, 1, ..)` lists, defined by `forward_entries!`. Built
//! only for sm_90a (`-Ctarget-cpu=sm_90a`, its package's rustflags in the nvptx build).
#![no_std]
#![feature(abi_ptx, asm_experimental_arch)]
// Empty (no entry uses the PTX ABI) where the build has no sm90 kernel: a default build whose
// host/dispatch-table-sm90a.tsv names none.
#![allow(unused_features)]

use flash_attn_kernels::forward_entries;

flash_attn_params::for_each_kernel_entry_of_shard!(Sm90, 1, forward_entries);
