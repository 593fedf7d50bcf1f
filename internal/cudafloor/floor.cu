// floor.cu measures, without Go, what a host-slice GEMV costs on a CUDA
// machine beyond its kernel: the caller's activations copied into pinned
// memory, a preparation kernel reading them from there, a 4-bit GEMV
// (4096x14336, the shape issue 42's host-slice target names) storing its
// results into pinned memory, one wait, the results copied out. Each way
// of doing it is timed call by call; the median is printed beside the
// GEMV kernel's own time (CUDA events over back-to-back launches).
//
// It is the reference the cuda package's host-slice Mul is compared with
// (BENCHMARKS.md, "CUDA through the API"): what the driver and the bus
// cost here, whatever the library does.
//
//   nvcc -O3 -arch=sm_90 -o floor internal/cudafloor/floor.cu -lcuda
//   ./floor [auto|spin|yield|block]   (context scheduling; default auto)

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include <cuda_fp16.h>
#include <cmath>

#define CKD(x)                                                                 \
  do {                                                                         \
    CUresult r_ = (x);                                                         \
    if (r_ != CUDA_SUCCESS) {                                                  \
      fprintf(stderr, "%s:%d %s: CUresult %d\n", __FILE__, __LINE__, #x,      \
              (int)r_);                                                        \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,                \
              cudaGetErrorString(e_));                                         \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

constexpr int ROWS = 4096, COLS = 14336;
constexpr int ROW_BYTES = COLS / 2; // 4-bit codes
constexpr int WARPS = 8;            // rows per block of the GEMV

// PDL: the kernels open as the library's do (sm_90 and later).
__device__ __forceinline__ void pdl_entry() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n\tgriddepcontrol.wait;" ::
                   : "memory");
#endif
}

__global__ void empty_kernel() { pdl_entry(); }

// prep rounds the pinned float32 activations to binary16 in device memory.
__global__ void prep(const float *__restrict__ x, __half *__restrict__ xh,
                     int n) {
  pdl_entry();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    xh[i] = __float2half_rn(x[i]);
}

// gemv: one warp per row of 4-bit codes (offset 8, one scale per row),
// 16-byte loads; the result goes to y (pinned host memory). With flag set,
// the last block to finish writes seq to *flag after every block's results
// are visible to the host.
__global__ void gemv(const uint4 *__restrict__ w, const float *__restrict__ sc,
                     const __half *__restrict__ xh, float *__restrict__ y,
                     unsigned *count, volatile unsigned *flag, unsigned seq) {
  pdl_entry();
  int lane = threadIdx.x & 31, row = blockIdx.x * WARPS + threadIdx.x / 32;
  const uint4 *wr = w + (size_t)row * (ROW_BYTES / 16);
  float acc = 0;
  for (int i = lane; i < ROW_BYTES / 16; i += 32) {
    uint4 q = wr[i];
    const __half2 *xp = reinterpret_cast<const __half2 *>(xh + i * 32);
    unsigned words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
#pragma unroll
      for (int j = 0; j < 4; j++) {
        unsigned b = words[k] >> (8 * j) & 0xff;
        float2 xf = __half22float2(xp[k * 4 + j]);
        acc += float((int)(b & 15) - 8) * xf.x + float((int)(b >> 4) - 8) * xf.y;
      }
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0)
    y[row] = acc * sc[row];
  if (flag == nullptr)
    return;
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned done = atomicAdd(count, 1);
    if (done == gridDim.x - 1) {
      *count = 0;
      __threadfence_system();
      *flag = seq;
    }
  }
}

using Clock = std::chrono::steady_clock;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct State {
  cudaStream_t s;
  uint4 *w;
  float *sc;
  __half *xh;
  unsigned *count;
  float *xpin, *ypin; // pinned, mapped
  unsigned *flagpin, *gatepin;
  float *xpinD, *ypinD; // their device addresses
  unsigned *flagD, *gateD;
  std::vector<float> x, y;
  unsigned seq = 0;
};

// Launch holds a launch's configuration, with programmatic dependent
// launch when pdl is set (the attribute must outlive the launch call).
struct Launch {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute at[1];
  Launch(dim3 grid, dim3 block, cudaStream_t s, bool pdl) {
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.stream = s;
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
  }
};

static void launch_prep(State &st, bool pdl) {
  Launch l(dim3((COLS + 255) / 256), dim3(256), st.s, pdl);
  CK(cudaLaunchKernelEx(&l.cfg, prep, (const float *)st.xpinD, st.xh, COLS));
}

static void launch_gemv(State &st, bool pdl, bool flag) {
  Launch l(dim3(ROWS / WARPS), dim3(32 * WARPS), st.s, pdl);
  CK(cudaLaunchKernelEx(&l.cfg, gemv, (const uint4 *)st.w,
                        (const float *)st.sc, (const __half *)st.xh, st.ypinD,
                        st.count,
                        (volatile unsigned *)(flag ? st.flagD : nullptr),
                        st.seq));
}

// One host-slice call: copy in, prep, gemv, wait, copy out.
enum Wait { STREAM_SYNC, FLAG_SPIN };

static double time_calls(const char *name, State &st, int n,
                         const std::function<void()> &queue, Wait wait,
                         double kernel_us) {
  std::vector<double> t;
  for (int i = 0; i < n + 200; i++) {
    auto t0 = Clock::now();
    memcpy(st.xpin, st.x.data(), COLS * sizeof(float));
    st.seq++;
    queue();
    if (wait == STREAM_SYNC) {
      CK(cudaStreamSynchronize(st.s));
    } else {
      while (*(volatile unsigned *)st.flagpin != st.seq) {
      }
    }
    memcpy(st.y.data(), st.ypin, ROWS * sizeof(float));
    auto t1 = Clock::now();
    if (i >= 200)
      t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  if (wait == FLAG_SPIN)
    CK(cudaStreamSynchronize(st.s));
  double m = median(t);
  std::sort(t.begin(), t.end());
  printf("%-52s median %6.2f us  p10 %6.2f  p90 %6.2f  over kernel %6.2f us\n",
         name, m, t[t.size() / 10], t[t.size() * 9 / 10], m - kernel_us);
  return m;
}

int main(int argc, char **argv) {
  const char *sched = argc > 1 ? argv[1] : "auto";
  unsigned flags = cudaDeviceMapHost;
  if (!strcmp(sched, "spin"))
    flags |= cudaDeviceScheduleSpin;
  else if (!strcmp(sched, "yield"))
    flags |= cudaDeviceScheduleYield;
  else if (!strcmp(sched, "block"))
    flags |= cudaDeviceScheduleBlockingSync;
  else
    flags |= cudaDeviceScheduleAuto;
  CK(cudaSetDeviceFlags(flags));
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  printf("device: %s, scheduling %s\n", p.name, sched);

  State st;
  CK(cudaStreamCreateWithFlags(&st.s, cudaStreamNonBlocking));
  size_t wbytes = (size_t)ROWS * ROW_BYTES;
  CK(cudaMalloc(&st.w, wbytes));
  CK(cudaMalloc(&st.sc, ROWS * sizeof(float)));
  CK(cudaMalloc(&st.xh, COLS * sizeof(__half)));
  CK(cudaMalloc(&st.count, sizeof(unsigned)));
  CK(cudaMemset(st.count, 0, sizeof(unsigned)));
  std::vector<uint8_t> hw(wbytes);
  {
    uint32_t r = 12345;
    for (auto &b : hw) {
      r = r * 1664525u + 1013904223u;
      b = r >> 24;
    }
    CK(cudaMemcpy(st.w, hw.data(), wbytes, cudaMemcpyHostToDevice));
    std::vector<float> hs(ROWS, 0.01f);
    CK(cudaMemcpy(st.sc, hs.data(), ROWS * sizeof(float),
                  cudaMemcpyHostToDevice));
  }
  CK(cudaHostAlloc(&st.xpin, COLS * sizeof(float), cudaHostAllocMapped));
  CK(cudaHostAlloc(&st.ypin, ROWS * sizeof(float), cudaHostAllocMapped));
  CK(cudaHostAlloc(&st.flagpin, 64, cudaHostAllocMapped));
  CK(cudaHostAlloc(&st.gatepin, 64, cudaHostAllocMapped));
  *st.gatepin = 0;
  *st.flagpin = 0;
  CK(cudaHostGetDevicePointer(&st.xpinD, st.xpin, 0));
  CK(cudaHostGetDevicePointer(&st.ypinD, st.ypin, 0));
  CK(cudaHostGetDevicePointer(&st.flagD, st.flagpin, 0));
  CK(cudaHostGetDevicePointer(&st.gateD, st.gatepin, 0));
  st.x.resize(COLS);
  st.y.resize(ROWS);
  for (int i = 0; i < COLS; i++)
    st.x[i] = (i % 7) * 0.125f - 0.3f;

  // Kernel times: events around back-to-back launches (weights as warm in
  // L2 as the calls below find them).
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto kernel_time = [&](const std::function<void()> &f) {
    for (int i = 0; i < 50; i++)
      f();
    const int n = 500;
    CK(cudaEventRecord(e0, st.s));
    for (int i = 0; i < n; i++)
      f();
    CK(cudaEventRecord(e1, st.s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return 1000.0 * ms / n;
  };
  double kg = kernel_time([&] { launch_gemv(st, false, false); });
  double kgp = kernel_time([&] { launch_gemv(st, true, false); });
  double kp = kernel_time([&] { launch_prep(st, false); });
  printf("gemv kernel %.2f us (back to back; %.2f us with PDL), prep kernel %.2f us\n",
         kg, kgp, kp);
  // The GEMV computes what it should: rows 0..3 against the host.
  memcpy(st.xpin, st.x.data(), COLS * sizeof(float));
  launch_prep(st, false);
  launch_gemv(st, false, false);
  CK(cudaStreamSynchronize(st.s));
  for (int r = 0; r < 4; r++) {
    double want = 0;
    for (int k = 0; k < COLS; k++) {
      uint8_t b = hw[(size_t)r * ROW_BYTES + k / 2];
      int q = (k & 1 ? b >> 4 : b & 15) - 8;
      want += q * (double)__half2float(__float2half_rn(st.x[k]));
    }
    want *= 0.01;
    if (fabs(want - st.ypin[r]) > 1e-3 * (1 + fabs(want))) {
      fprintf(stderr, "row %d: gemv %g, host %g\n", r, st.ypin[r], want);
      return 1;
    }
  }

  const int n = 3000;
  // The least: an empty kernel launched and waited for.
  {
    std::vector<double> t;
    for (int i = 0; i < n + 200; i++) {
      auto t0 = Clock::now();
      empty_kernel<<<1, 32, 0, st.s>>>();
      CK(cudaStreamSynchronize(st.s));
      auto t1 = Clock::now();
      if (i >= 200)
        t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    printf("%-52s median %6.2f us\n", "empty kernel, launch and wait", median(t));
  }
  {
    std::vector<double> t;
    for (int i = 0; i < n + 200; i++) {
      auto t0 = Clock::now();
      CK(cudaMemcpyAsync(st.xh, st.xpin, 1024, cudaMemcpyHostToDevice, st.s));
      CK(cudaStreamSynchronize(st.s));
      auto t1 = Clock::now();
      if (i >= 200)
        t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    printf("%-52s median %6.2f us\n", "1 KiB pinned copy to the device and wait",
           median(t));
  }

  time_calls("gemv only (input already there), stream sync", st, n,
             [&] { launch_gemv(st, false, false); }, STREAM_SYNC, kg);
  time_calls("prep + gemv, two launches, stream sync", st, n,
             [&] {
               launch_prep(st, false);
               launch_gemv(st, false, false);
             },
             STREAM_SYNC, kg);
  time_calls("prep + gemv, two launches with PDL, stream sync", st, n,
             [&] {
               launch_prep(st, true);
               launch_gemv(st, true, false);
             },
             STREAM_SYNC, kg);
  time_calls("prep + gemv, two launches with PDL, flag spin", st, n,
             [&] {
               launch_prep(st, true);
               launch_gemv(st, true, true);
             },
             FLAG_SPIN, kg);

  // The same two kernels as a graph (captured with their PDL edge). The
  // flag variant needs seq as a kernel argument: the graph is re-captured
  // into an exec update for each call.
  for (int flag = 0; flag < 2; flag++) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeThreadLocal));
    launch_prep(st, true);
    launch_gemv(st, true, flag);
    CK(cudaStreamEndCapture(st.s, &g));
    CK(cudaGraphInstantiateWithFlags(&ge, g, 0));
    if (!flag) {
      time_calls("prep + gemv as a graph, stream sync", st, n,
                 [&] { CK(cudaGraphLaunch(ge, st.s)); }, STREAM_SYNC, kg);
    } else {
      // The graph's seq is fixed at capture: spin on "flag changed" by
      // making the host expect it; reset the flag before each call.
      std::vector<double> t;
      unsigned want = st.seq;
      for (int i = 0; i < n + 200; i++) {
        *(volatile unsigned *)st.flagpin = want - 1;
        auto t0 = Clock::now();
        memcpy(st.xpin, st.x.data(), COLS * sizeof(float));
        CK(cudaGraphLaunch(ge, st.s));
        while (*(volatile unsigned *)st.flagpin != want) {
        }
        memcpy(st.y.data(), st.ypin, ROWS * sizeof(float));
        auto t1 = Clock::now();
        if (i >= 200)
          t.push_back(
              std::chrono::duration<double, std::micro>(t1 - t0).count());
        CK(cudaStreamSynchronize(st.s));
      }
      double m = median(t);
      printf("%-52s median %6.2f us  over kernel %6.2f us\n",
             "prep + gemv as a graph, flag spin", m, m - kg);
    }
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
  }
  // Gated: the kernels are queued behind a wait for a pinned word (a
  // stream memory operation), the caller's activations copied while the
  // launch travels, then the word set.
  auto gate = [&] {
    CKD(cuStreamWaitValue32_v2((CUstream)st.s, (CUdeviceptr)st.gateD, 1,
                               CU_STREAM_WAIT_VALUE_EQ));
    CKD(cuStreamWriteValue32_v2((CUstream)st.s, (CUdeviceptr)st.gateD, 0, 0));
  };
  auto gated = [&](const char *name, const std::function<void()> &queue) {
    std::vector<double> t;
    for (int i = 0; i < n + 200; i++) {
      auto t0 = Clock::now();
      queue();
      memcpy(st.xpin, st.x.data(), COLS * sizeof(float));
      __atomic_store_n(st.gatepin, 1u, __ATOMIC_SEQ_CST);
      CK(cudaStreamSynchronize(st.s));
      memcpy(st.y.data(), st.ypin, ROWS * sizeof(float));
      auto t1 = Clock::now();
      if (i >= 200)
        t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    double m = median(t);
    printf("%-52s median %6.2f us  over kernel %6.2f us\n", name, m, m - kg);
  };
  gated("gated: wait, prep + gemv with PDL, copy, open", [&] {
    gate();
    launch_prep(st, true);
    launch_gemv(st, true, false);
  });
  {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeThreadLocal));
    gate();
    launch_prep(st, true);
    launch_gemv(st, true, false);
    CK(cudaStreamEndCapture(st.s, &g));
    CK(cudaGraphInstantiateWithFlags(&ge, g, 0));
    gated("gated graph: launch, copy, open", [&] { CK(cudaGraphLaunch(ge, st.s)); });
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
  }
  CK(cudaStreamSynchronize(st.s));
  printf("y[0..3] = %g %g %g %g\n", st.y[0], st.y[1], st.y[2], st.y[3]);
  return 0;
}
