// What flink-gpu tells systemd and asks of it, without libsystemd (the programs load glibc alone):
// the notification protocol of sd_notify(3), one datagram to $NOTIFY_SOCKET, and whether
// standard error is the journal, which $JOURNAL_STREAM tells as systemd.exec(5) documents it.
// Both are plain protocols over the environment, so that a unit of Type=notify and the journal's
// own time stamps work, and nothing changes for a program not started by systemd.
#pragma once

#include <string_view>
#include <system_error>

namespace flink::cli::systemd {

/// Sends `state` (e.g. "READY=1", "STOPPING=1"; "KEY=VALUE" lines) to the service manager as one
/// datagram on the AF_UNIX socket $NOTIFY_SOCKET names: a file system path ("/run/systemd/notify"),
/// or an abstract socket when it starts with '@'. Does nothing, and succeeds, where the variable is
/// unset or empty (a program not started as a unit of Type=notify).
/// @returns the cause when it is set and the datagram was not sent: invalid_argument for an
///          address that is neither (relative, too long), else the errno of socket or sendto.
std::error_code notify(std::string_view state);

/// Whether standard error (fd 2) is a stream to the journal: $JOURNAL_STREAM holds
/// "<device>:<inode>" (decimal) of the stream systemd connected, and fstat(2) of fd 2 gives the
/// same st_dev and st_ino. False when the variable is unset or malformed, or names another file
/// (stderr redirected since, in the unit or by a shell it started).
bool stderrIsJournal();

}  // namespace flink::cli::systemd
