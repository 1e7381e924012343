/* cuda-mps-client: a CUDA client of the driver API for scripts/gpu-machine-check.sh's MPS step,
 * without the CUDA toolkit: it dlopens libcuda.so.1 (the driver's library) at run time, so it
 * builds and links on a machine without CUDA and loads nothing but glibc until it runs.
 *
 *   cuda-mps-client MIB SECONDS
 *
 * Creates a context on device 0 of those it can see (under MPS: the one the control daemon
 * serves, within CUDA_MPS_PINNED_DEVICE_MEM_LIMIT), allocates MIB MiB, prints
 * "client <pid>: allocated <MIB> MiB", holds the memory SECONDS seconds, or until SIGTERM (the
 * check ends its clients so once it has looked at them), and exits 0.
 *
 * Exit status: 0 allocated and held; 3 the allocation failed (the line says
 * "allocating <MIB> MiB failed: CUDA error <code>"), which is what a client asking more than its
 * share must get; 2 anything else: usage, no libcuda.so.1, a missing function, CUDA's set-up. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*init_t)(unsigned);
typedef int (*device_get_t)(int*, int);
typedef int (*ctx_create_t)(void**, unsigned, int);
typedef int (*mem_alloc_t)(unsigned long long*, size_t);

/* SIGTERM ends the hold early: it interrupts sleep(), or, come before it, skips it. */
static volatile sig_atomic_t terminated = 0;
static void on_term(int signal_number) {
  (void)signal_number;
  terminated = 1;
}

/* A non-negative decimal number of at most 9 digits, or -1. */
static long parse_count(const char* text) {
  long value = 0;
  int digits = 0;
  for (; *text != '\0'; ++text, ++digits) {
    if (*text < '0' || *text > '9' || digits == 9) return -1;
    value = value * 10 + (*text - '0');
  }
  return digits == 0 ? -1 : value;
}

/* dlsym with dlerror cleared first, so that a failure names the symbol and the loader's cause.
 * The address is copied into `function`, a function pointer of `size` bytes: ISO C has no cast
 * from an object pointer to a function pointer, POSIX guarantees they have one representation.
 * Returns 0 when the symbol is missing. */
static int symbol(void* library, const char* name, void* function, size_t size) {
  void* found;
  dlerror();
  found = dlsym(library, name);
  if (found == NULL || size != sizeof found) {
    const char* why = dlerror();
    fprintf(stderr, "cuda-mps-client: libcuda.so.1 has no %s: %s\n", name, why ? why : "null");
    return 0;
  }
  memcpy(function, &found, size);
  return 1;
}

int main(int argc, char** argv) {
  long mib, seconds;
  void* cuda;
  init_t init;
  device_get_t device_get;
  ctx_create_t ctx_create;
  mem_alloc_t mem_alloc;
  int device = 0, rc;
  void* context = NULL;
  unsigned long long pointer = 0;

  if (argc != 3 || (mib = parse_count(argv[1])) < 0 || (seconds = parse_count(argv[2])) < 0) {
    fprintf(stderr, "usage: cuda-mps-client MIB SECONDS\n");
    return 2;
  }
  {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_term;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, NULL);
  }
  cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (cuda == NULL) {
    fprintf(stderr, "cuda-mps-client: %s\n", dlerror());
    return 2;
  }
  if (!symbol(cuda, "cuInit", &init, sizeof init) ||
      !symbol(cuda, "cuDeviceGet", &device_get, sizeof device_get) ||
      !symbol(cuda, "cuCtxCreate_v2", &ctx_create, sizeof ctx_create) ||
      !symbol(cuda, "cuMemAlloc_v2", &mem_alloc, sizeof mem_alloc)) {
    return 2;
  }
  if ((rc = init(0)) != 0 || (rc = device_get(&device, 0)) != 0 ||
      (rc = ctx_create(&context, 0, device)) != 0) {
    fprintf(stderr, "cuda-mps-client: CUDA set-up failed: CUDA error %d\n", rc);
    return 2;
  }
  rc = mem_alloc(&pointer, (size_t)mib << 20);
  if (rc != 0) {
    printf("client %ld: allocating %ld MiB failed: CUDA error %d\n", (long)getpid(), mib, rc);
    return 3;
  }
  printf("client %ld: allocated %ld MiB\n", (long)getpid(), mib);
  fflush(stdout);
  if (seconds > 0 && (terminated || sleep((unsigned)seconds) != 0)) {
    printf("client %ld: released on SIGTERM\n", (long)getpid());
  }
  return 0;
}
