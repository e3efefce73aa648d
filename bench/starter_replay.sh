#!/bin/bash
# The starter-replay figure (issue 13): the 27 starter ops replayed by `kope run` with no model,
# from fresh data and cache directories, timed by /usr/bin/time -v, with the load average sampled
# every 10 s into $D/load.txt. Usage: bench/starter_replay.sh [DIR] [KOPE]; read $D/err.txt (time)
# and $D/out.txt (the summary table).
D=${1:-/tmp/sf_measure}
KOPE=${2:-$(cd "$(dirname "$0")/.." && pwd)/build/kope}
rm -rf $D; mkdir -p $D/xdg
OPS=add,argmax_rows,attention_masked,avgpool2d_3x3,batched_matmul,concat,conv2d_1x1,conv2d_3x3,conv2d_bias_relu,cross_entropy,cumsum,depthwise_conv2d_3x3,gelu,layernorm,matmul_bias_relu,maxpool2d_2x2,mse_loss,permute_nchw_nhwc,relu,rmsnorm,sdpa,sgemm,sgemv,silu,softmax,sum_rows,transpose2d
( while true; do echo "$(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)" >> $D/load.txt; sleep 10; done ) &
SAMPLER=$!
cd $D
env -u KOPE_MODEL -u KOPE_PROFILE -u OPENAI_BASE_URL -u OPENAI_API_KEY -u KOPE_MEMORY XDG_CONFIG_HOME=$D/xdg \
  KOPE_TIMING_LOCK=$D/timing.lock KOPE_DATA_DIR=$D/data KOPE_CACHE_DIR=$D/cache \
  /usr/bin/time -v $KOPE run --ops $OPS --run-dir $D/run > $D/out.txt 2> $D/err.txt
echo "rc $?" >> $D/err.txt
kill $SAMPLER
