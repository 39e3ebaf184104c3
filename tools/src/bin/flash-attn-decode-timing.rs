//! Times decode against a KV cache (`forward_kv_cache`) with CUDA events around back-to-back
//! launches, at the serving issue's shapes (fp16 and bf16, D=128, one query row, 32 query heads
//! over 8 K/V heads, full contiguous caches): median and spread, and the K+V read rate.
//!
//! `flash-attn-decode-timing`: one line per case: median, p10-p90, K+V read rate, splits.

use cust::memory::DeviceBuffer;
use flash_attn::reference::random_normal;
use flash_attn::{
    plan_kv_cache, AttentionShape, Element, Error, FlashAttention, ForwardOptions, Layout,
};
use flash_attn_tools::timing::time_launches;
use half::{bf16, f16};

/// (batch, cache length): the two shapes and its large-batch one.
const DECODE_SHAPES: [(usize, usize); 3] = [(8, 8192), (1, 32768), (64, 2048)];

fn time<T: Element>(gpu: &FlashAttention, name: &str) -> Result<(), Error> {
    for (batch, length) in DECODE_SHAPES {
        let shape = AttentionShape {
            batch,
            heads_q: 32,
            heads_kv: 8,
            seq_len_q: 1,
            seq_len_kv: length,
            head_dim: 128,
        };
        let options = ForwardOptions {
            layout: Layout::Bshd,
            ..ForwardOptions::default()
        };
        let plan = plan_kv_cache(T::DTYPE, &shape, &options, gpu.sm_count())?;
        let q = DeviceBuffer::from_slice(&random_normal::<T>(shape.q_elements()?, 0.5, 1.0, 1))?;
        let kv = shape.kv_elements()?;
        let k = DeviceBuffer::from_slice(&random_normal::<T>(kv, 0.5, 1.0, 2))?;
        let v = DeviceBuffer::from_slice(&random_normal::<T>(kv, 0.5, 1.0, 3))?;
        let lens = DeviceBuffer::from_slice(&vec![length as u32; batch])?;
        let mut output = DeviceBuffer::from_slice(&vec![T::from_f64(0.0); shape.q_elements()?])?;
        let times = time_launches(gpu.stream(), 50, 30, 100, || {
            gpu.forward_kv_cache(&q, &k, &v, &lens, &mut output, None, shape, &options)
        })?;
        let median = times.median();
        let bytes = 2.0 * kv as f64 * 2.0;
        println!(
            "{name} B={batch} L={length}: {median:.1} us (p10-p90 {:.1}-{:.1}), K+V {:.2} TB/s, \
             {} splits, host {:.1} us/launch",
            times.quantile(0.1),
            times.quantile(0.9),
            bytes / (median * 1e-6) / 1e12,
            plan.splits(),
            times.host_us_per_launch
        );
    }
    Ok(())
}

fn main() -> Result<(), Error> {
    let gpu = FlashAttention::new()?;
    println!(
        "decode timing on {} ({} SMs)",
        gpu.device_name(),
        gpu.sm_count()
    );
    time::<f16>(&gpu, "f16")?;
    time::<bf16>(&gpu, "bf16")?;
    Ok(())
}
