// The command of `flink-gpu exec`, run as exec's child and waited for, as flock(1) runs its
// command: exec keeps what holds the GPUs (the records name its pid, its descriptors hold the
// leases) for as long as the command runs, so nothing the command does with its descriptors, its
// namespaces or its children can free them. This file knows nothing of GPUs: it starts the
// command, passes signals on to it, and reports how it ended.
//
// The command is what a shell's foreground job would be: in exec's process group (so that the
// terminal's Ctrl-C, Ctrl-\ and Ctrl-Z reach both, and `fg` continues both), with exec's
// descriptors (those without close-on-exec: its standard ones and the leases), environment,
// working directory, CPU affinity and signal mask, and the signal dispositions a shell gives a
// command: flink-gpu's handlers back to default, SIGPIPE back to default, what was ignored when
// flink-gpu started still ignored. It gets the parent-death signal SIGKILL, so that it does not
// outlive an exec that is killed (which then holds nothing for it).
//
// Once for a process: the signals are passed on by handlers of the process, which stay installed
// until it exits. Other threads may run meanwhile: whichever takes a signal passes it on.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace flink::cli {

/// A command started by startCommand: running, or never run.
struct StartedCommand {
  /// The child, running the command; -1 when it could not be started.
  pid_t pid = -1;
  /// Why it could not: the errno of the failed execvp (ENOENT: not found), of fork, or of asking
  /// for the parent-death signal. 0 when it runs.
  int error = 0;
};

/// Starts `command` (argv; argv[0] looked up on PATH as execvp does) as a child of this process.
/// When it runs, each of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 (those not ignored)
/// that another process sends to this one is passed on to it, until waitForCommand has seen it
/// end; then they go nowhere, until the process exits. One the kernel sends to the whole process
/// group (the terminal's) reached the command already, and one the command sends its parent is not
/// sent back to it. SIGCHLD's disposition is the default from here on. When the command does not
/// run (the child already reaped), the dispositions and the signal mask are as before. Flushes
/// stdout and stderr (C++ and C streams) first, so that what flink-gpu printed comes before what
/// the command prints.
StartedCommand startCommand(const std::vector<std::string>& command);

/// Waits for the command `pid` (from startCommand) to end, and reaps it. A stop (Ctrl-Z) is not an
/// end.
/// @returns its exit code, or 128 + N when signal N ended it, as a shell reports it.
/// @throws std::system_error when it cannot be waited for (ECHILD: someone else reaped it).
int waitForCommand(pid_t pid);

}  // namespace flink::cli
