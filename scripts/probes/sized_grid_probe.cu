// Issue 36's third probe: a consumer's grid set on the device, in the same replay, through a
// device-updatable kernel node (CUDA 12.4+), instead of a SWITCH over size classes. Not library
// code: its measured output is committed under results/, and the library's design follows from it.
//
// The second probe (sized_step_hops_probe.cu) found that a SWITCH's device-side launch of its body
// costs about 7 us of a sized step's 9.8, where the exact grid costs 1.9 and a capped over-launch
// 4.0. A kernel node created with cudaLaunchAttributeDeviceUpdatableKernelNode hands back a
// cudaGraphDeviceNode_t, and a kernel that runs before it in the same graph can set its grid
// (cudaGraphKernelNodeSetGridDim) or disable it (cudaGraphKernelNodeSetEnabled): the consumer then
// runs with the exact grid with no conditional node at all.
//
// Part 1, what the driver accepts (each line says yes, or the error it returned):
//   explicit    nodes added one by one; the consumer opted in with cudaGraphKernelNodeSetAttribute
//               after it was added, the resizer added after it (its parameter is the handle),
//               then the edge resizer -> consumer;
//   capture     stream capture, as a user's capture records a sized step: the resizer is captured
//               first with a null handle, the consumer then launched with the attribute, and the
//               resizer's parameters set once the handle exists (during the capture, else after);
//   capture-add stream capture, the consumer, its opt-in, the resizer and the edge added to the
//               capture's graph explicitly, as SizedLaunch::record adds its setter and SWITCH;
//   twice       a second cudaGraphInstantiate of a graph holding such a node (documented: refused);
//   clone       cudaGraphClone of it (the library clones bodies into SWITCH nodes);
//   child       a child-graph node made from it (a sized step inserted into another graph);
//   persist     whether a device update made in one replay is still in force in the next;
//   exec-set    the resizer's own parameter set on the executable graph between launches (as an
//               enqueue sets its setter's sequence number), without and then with a new upload;
//   no-upload   launched with no cudaGraphUpload (documented as needed; a user's instantiation of
//               a captured graph may skip it);
//   upload-flag instantiated with cudaGraphInstantiateFlagUpload instead.
// Part 2, per step inside one graph of S steps, p50 and p99 over replays, every step checked
// (each step's rows counted by the consumer, its grid recorded, the last step's values):
//   exact       the consumer's grid for the step's count, known when the graph was built (the floor);
//   over        the capacity's grid (4096 blocks), blocks past the count exit at once;
//   setter      producer -> one-thread setter -> SWITCH over 6 classes (the library today);
//   resize      producer -> one-thread resizer -> the device-updatable consumer, exact grid;
//   fused       the producer itself sets the consumer's grid once it has written the count;
//               (resize and fused set the grid and enable the node at every step, two device
//               calls);
//   resize-batch the resizer's two updates in one cudaGraphKernelNodeUpdatesApply call;
//   and the loop forms, the same S steps as iterations of one WHILE node (the count read from a
//   device iteration counter): over-while, setter-while, resize-while (a body's node updated once
//   per iteration, which part 1 cannot show). The loop forms' producer runs the capacity's grid
//   (the count is the iteration's), the others' the step's exact grid: compare a loop form with
//   over-while (per_over), not with exact.
// Count regimes: every step 1000 (the ways' overhead alone); log-uniform in [1, 2^20]; the same
// with every 8th step 0, which the resize ways answer by disabling the consumer (its grid stays
// unrecorded) and, in resize-while, enabling the same node again at the next iteration.
// Build (GPU host): nvcc -O3 -std=c++17 -arch=sm_90 sized_grid_probe.cu -o probe (beside it:
// sized_grid_ways.cuh, the ways and the checks; sized_grid_accepts.cuh, part 1)
// Run: ./probe [STEPS REPEATS JSON_PATH]
#include "sized_grid_ways.cuh"
#include "sized_grid_accepts.cuh"

int main(int argc, char** argv) {
  int S = argc > 1 ? atoi(argv[1]) : 64;
  int R = argc > 2 ? atoi(argv[2]) : 50;
  const char* json = argc > 3 ? argv[3] : "probe.json";
  int dev = 0, drv = 0, rt = 0;
  CK(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  CK(cudaDriverGetVersion(&drv));
  CK(cudaRuntimeGetVersion(&rt));
  printf("device %s, driver API %d, runtime %d, %d SMs; %d steps per graph, %d replays after 5 warm-ups\n", prop.name,
         drv, rt, prop.multiProcessorCount, S, R);
  FILE* js = fopen(json, "w");
  if (!js) {
    printf("FAIL cannot write %s\n", json);
    return 1;
  }
  fprintf(js, "{\n \"device\": \"%s\",\n \"driver_api\": %d,\n \"runtime\": %d,\n \"steps\": %d,\n \"replays\": %d,\n",
          prop.name, drv, rt, S, R);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Bufs b;
  CK(cudaMalloc(&b.x, CAP * sizeof(float)));
  CK(cudaMalloc(&b.y, CAP * sizeof(float)));
  CK(cudaMalloc(&b.count, sizeof(int)));
  CK(cudaMalloc(&b.counts, S * sizeof(int)));
  CK(cudaMalloc(&b.done, S * sizeof(int)));
  CK(cudaMalloc(&b.grids, S * sizeof(unsigned)));
  CK(cudaMalloc(&b.iter, sizeof(int)));
  CK(cudaMalloc(&b.err, sizeof(int)));

  fprintf(js, " \"accepts\": [");
  part1(b, s, js);

  fprintf(js, " \"ways\": [");
  bool first = true;
  const char* regimes[3] = {"n=1000", "log-uniform[1,2^20]", "log-uniform, every 8th 0"};
  for (int r = 0; r < 3; ++r) {
    std::vector<int> counts(S);
    std::mt19937 rng(7);  // regimes 1 and 2 draw the same counts
    std::uniform_real_distribution<double> u(0, std::log((double)CAP));
    for (int k = 0; k < S; ++k) {
      counts[k] = r == 0 ? 1000 : std::max(1, (int)std::exp(u(rng)));
      if (r == 2 && k % 8 == 7) counts[k] = 0;
    }
    std::vector<int> sorted = counts;
    std::sort(sorted.begin(), sorted.end());
    printf("%s: median count %d\n", regimes[r], sorted[S / 2]);
    CK(cudaMemcpy(b.counts, counts.data(), S * sizeof(int), cudaMemcpyHostToDevice));
    double base[WAYS] = {0};
    for (int w = 0; w < WAYS; ++w) {
      cudaGraphExec_t e;
      double build_us = 0;
      if (!build((Way)w, b, counts, s, &e, &build_us)) {
        printf("%-26s %-13s refused: %s\n", regimes[r], way_name[w], g_refused.c_str());
        fprintf(js, "%s\n  {\"regime\": \"%s\", \"way\": \"%s\", \"refused\": \"%s\"}", first ? "" : ",", regimes[r],
                way_name[w], g_refused.c_str());
        first = false;
        g_refused.clear();
        continue;
      }
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      std::vector<double> per;
      int wrong = 0;
      for (int i = 0; i < R + 5; ++i) {
        clear(b, S);
        CK(cudaEventRecord(e0, s));
        CK(cudaGraphLaunch(e, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 5) per.push_back(1000.0 * ms / S);
        if (i == 0 || i == R + 4) wrong += check((Way)w, b, counts);
      }
      double p50 = pct(per, 0.5), p99 = pct(per, 0.99);
      base[w] = p50;
      double ex = base[EXACT], ov = base[is_loop((Way)w) ? OVER_WHILE : OVER];
      printf("%-26s %-13s per step p50 %7.2f us  p99 %7.2f us  /exact %.3f  /over %.3f  build %8.0f us  wrong %d\n",
             regimes[r], way_name[w], p50, p99, ex > 0 ? p50 / ex : 0.0, ov > 0 ? p50 / ov : 0.0, build_us, wrong);
      fprintf(js,
              "%s\n  {\"regime\": \"%s\", \"way\": \"%s\", \"p50_us\": %.3f, \"p99_us\": %.3f, \"per_exact\": %.4f, "
              "\"per_over\": %.4f, \"build_us\": %.0f, \"wrong\": %d}",
              first ? "" : ",", regimes[r], way_name[w], p50, p99, ex > 0 ? p50 / ex : 0.0, ov > 0 ? p50 / ov : 0.0,
              build_us, wrong);
      first = false;
      CK(cudaGraphExecDestroy(e));
      CK(cudaEventDestroy(e0));
      CK(cudaEventDestroy(e1));
    }
  }
  fprintf(js, "\n ]\n}\n");
  fclose(js);
  printf("done\n");
  return 0;
}
