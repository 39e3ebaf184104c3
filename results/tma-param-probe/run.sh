cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 60 python3 probe.py tma_align64 2>&1
timeout 60 python3 probe.py tma_align8 2>&1
timeout 120 compute-sanitizer --tool memcheck python3 probe.py tma_align8 2>&1 | head -30
