/* spawn_floor: the least work a program can do that runs a command and passes on what it
 * printed, as the floor under the process benchmarks' targets on the machine that runs them.
 *
 *   spawn_floor COMMAND [ARG...]
 *
 * It starts, runs COMMAND (searched on PATH, as posix_spawnp searches) with its standard output
 * on a pipe, copies what comes down the pipe to its own standard output, waits for COMMAND and
 * exits with its status (127 when it could not be run, 126 on any other failure of its own, a
 * failed write included). Nothing else: no C++ runtime, no parsing of arguments or output, no
 * configuration, no checks. It is C on glibc alone, built twice (bench/CMakeLists.txt):
 *
 *   spawn_floor         linked as our programs are: dynamically (they dlopen NVML and plugins,
 *                       which a static glibc cannot do reliably), PIE, no RUNPATH;
 *   spawn_floor_static  -static-pie: the least a PIE on glibc can cost (plain -static, without
 *                       the self-relocation, costs a little less again).
 *
 * A `flink-gpu discover` of a script does at least this much around the script, so
 * (spawn_floor + script) / script is the least ratio a program like ours can reach here, and
 * likewise for a discovery program that runs nvidia-smi (cli_bench, discovery_bench). Not
 * installed; not a model of how to write a program (it reports no cause on failure). */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

static int writeAll(const char* data, ssize_t size) {
  while (size > 0) {
    const ssize_t written = write(STDOUT_FILENO, data, (size_t)size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return -1;
    data += written;
    size -= written;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return 126;
  int pipeFds[2];
  if (pipe2(pipeFds, O_CLOEXEC) != 0) return 126;
  posix_spawn_file_actions_t actions;
  if (posix_spawn_file_actions_init(&actions) != 0 ||
      posix_spawn_file_actions_adddup2(&actions, pipeFds[1], STDOUT_FILENO) != 0) {
    return 126;
  }
  pid_t child;
  const int spawned = posix_spawnp(&child, argv[1], &actions, NULL, argv + 1, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipeFds[1]);
  if (spawned != 0) return 127;

  int failed = 0;
  char buffer[4096];
  for (;;) {
    const ssize_t got = read(pipeFds[0], buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got < 0) failed = 1;
      break;
    }
    if (writeAll(buffer, got) != 0) failed = 1;
  }
  close(pipeFds[0]);

  int status;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return 126;
  }
  if (failed) return 126;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}
