//! A decode loop over a paged KV cache, as a serving engine runs one: 8 sequences with prompts
//! of different lengths already in the cache, pages handed out in a scrambled order, then 64
//! steps that each append one token's keys and values to every sequence and attend its new
//! query to the whole cache (`forward_paged_kv_cache`). Prints the time per step and the last
//! step's error against the CPU reference.
//!
//! ```sh
//! cargo run --release --example decode_loop
//! ```
//!
//! Without a GPU it says what is missing and exits 0 (1 with `FLASH_ATTN_REQUIRE_GPU` set).

mod common;

use std::time::Instant;

use cust::memory::{CopyDestination, DeviceBuffer, DeviceSlice};
use flash_attn::reference::{attention_paged_kv_cache, random_normal, Precision, Scoring};
use flash_attn::{
    AttentionShape, Dtype, Error, FlashAttention, ForwardOptions, Layout, PagedKvCache,
};
use half::f16;

const BATCH: usize = 8;
const HEADS_Q: usize = 32;
const HEADS_KV: usize = 8;
const HEAD_DIM: usize = 128;
const PAGE_SIZE: usize = 16;
/// Up to 1024 keys per sequence.
const PAGES_PER_SEQUENCE: usize = 64;
const STEPS: usize = 64;

/// Elements of one token's keys (or values): all its K/V heads.
const TOKEN_ELEMENTS: usize = HEADS_KV * HEAD_DIM;

/// Writes one token's keys or values at position `position` of sequence `sequence`, in the
/// host copy of the pages and on the device.
fn append(
    pages: &mut [f16],
    device_pages: &mut DeviceSlice<f16>,
    block_table: &[u32],
    (sequence, position): (usize, usize),
    token: &[f16],
) -> Result<(), Error> {
    let page = block_table[sequence * PAGES_PER_SEQUENCE + position / PAGE_SIZE] as usize;
    let start = (page * PAGE_SIZE + position % PAGE_SIZE) * TOKEN_ELEMENTS;
    pages[start..start + TOKEN_ELEMENTS].copy_from_slice(token);
    device_pages
        .index(start..start + TOKEN_ELEMENTS)
        .copy_from(token)?;
    Ok(())
}

fn main() -> Result<(), Error> {
    let attention = match FlashAttention::new() {
        Ok(attention) => attention,
        Err(Error::NoGpu(error)) => common::exit_without_gpu("decode_loop", &error),
        Err(error) => return Err(error),
    };
    let paged = PagedKvCache {
        num_pages: BATCH * PAGES_PER_SEQUENCE,
        page_size: PAGE_SIZE,
        pages_per_sequence: PAGES_PER_SEQUENCE,
    };
    // One new query row per sequence; `seq_len_kv` is the capacity, `cache_lens` what is used.
    let shape = AttentionShape {
        batch: BATCH,
        heads_q: HEADS_Q,
        heads_kv: HEADS_KV,
        seq_len_q: 1,
        seq_len_kv: PAGES_PER_SEQUENCE * PAGE_SIZE,
        head_dim: HEAD_DIM,
    };
    // q and the output [batch, 1, heads_q, head_dim]; the pages [num_pages, page_size,
    // heads_kv, head_dim].
    let options = ForwardOptions {
        layout: Layout::Bshd,
        ..ForwardOptions::default()
    };
    let plan = flash_attn::plan_paged_kv_cache(
        Dtype::F16,
        &shape,
        &paged,
        &options,
        attention.sm_count(),
    )?;
    println!(
        "{}: decode of {BATCH} sequences, {HEADS_Q} query heads over {HEADS_KV} K/V heads, head \
         dim {HEAD_DIM}, fp16, pages of {PAGE_SIZE} keys; kernel {}, {} key splits",
        attention.device_name(),
        plan.kernel().entry,
        plan.splits()
    );

    // Sequence b's pages: every 37th page of the pool from 11 on (37 is prime to the pool's
    // 512 pages, so each page goes to exactly one sequence), as a free list hands them out.
    let block_table: Vec<u32> = (0..paged.num_pages)
        .map(|i| ((i * 37 + 11) % paged.num_pages) as u32)
        .collect();
    // The prompts (100 to 779 tokens) are in the cache already; the rest of the pool holds
    // whatever was there (random here): it is never read.
    let mut cache_lens: Vec<u32> = (0..BATCH).map(|b| (100 + 97 * b) as u32).collect();
    let pool_elements = paged.num_pages * PAGE_SIZE * TOKEN_ELEMENTS;
    let mut k_pages: Vec<f16> = random_normal(pool_elements, 0.5, 1.0, 1);
    let mut v_pages: Vec<f16> = random_normal(pool_elements, 0.5, 1.0, 2);
    let mut device_k = DeviceBuffer::from_slice(&k_pages)?;
    let mut device_v = DeviceBuffer::from_slice(&v_pages)?;
    let device_table = DeviceBuffer::from_slice(&block_table)?;
    let mut device_lens = DeviceBuffer::from_slice(&cache_lens)?;
    let mut q: Vec<f16> = vec![f16::ZERO; shape.q_elements()?];
    let mut device_q = DeviceBuffer::from_slice(&q)?;
    let mut device_output = DeviceBuffer::from_slice(&q)?;

    // cust's copies run on the legacy default stream, which the instance's (blocking) stream
    // is ordered with: each step's uploads wait for the previous step's kernel, and its kernel
    // for them.
    let start = Instant::now();
    for step in 0..STEPS {
        let seed = 1000 * step as u64;
        for (sequence, length) in cache_lens.iter_mut().enumerate() {
            let position = (sequence, *length as usize);
            let token_seed = seed + 10 * sequence as u64;
            let keys: Vec<f16> = random_normal(TOKEN_ELEMENTS, 0.5, 1.0, token_seed);
            let values: Vec<f16> = random_normal(TOKEN_ELEMENTS, 0.5, 1.0, token_seed + 1);
            append(&mut k_pages, &mut device_k, &block_table, position, &keys)?;
            append(&mut v_pages, &mut device_v, &block_table, position, &values)?;
            *length += 1;
        }
        device_lens.copy_from(&cache_lens[..])?;
        q = random_normal(shape.q_elements()?, 0.5, 1.0, seed + 7);
        device_q.copy_from(&q[..])?;
        attention.forward_paged_kv_cache(
            &device_q,
            &device_k,
            &device_v,
            &device_table,
            &device_lens,
            &mut device_output,
            None,
            shape,
            &paged,
            &options,
        )?;
    }
    attention.synchronize()?;
    println!(
        "{STEPS} steps: {:.1} µs per step, the uploads of each step's keys, values, lengths and \
         queries included; caches now {} to {} keys",
        start.elapsed().as_secs_f64() * 1e6 / STEPS as f64,
        cache_lens[0],
        cache_lens[BATCH - 1]
    );

    // The last step against the reference (with one query row, [batch, 1, heads, head_dim] is
    // also the reference's [batch, heads, 1, head_dim]).
    let mut output = vec![f16::ZERO; shape.q_elements()?];
    device_output.copy_to(&mut output[..])?;
    let scale = shape.default_softmax_scale() as f64;
    let reference = |precision| {
        attention_paged_kv_cache(
            &q,
            &k_pages,
            &v_pages,
            &block_table,
            &cache_lens,
            shape,
            &paged,
            &Scoring::plain(scale, false),
            precision,
        )
    };
    let (exact, plain) = (
        reference(Precision::F64),
        reference(Precision::Plain(Dtype::F16)),
    );
    if !common::report_error(output.iter().map(|x| x.to_f64()), &exact, &plain) {
        std::process::exit(1);
    }
    Ok(())
}
