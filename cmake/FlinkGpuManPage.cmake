# Makes the manual page flink-gpu(1), gzip -9n'd as Debian wants it, from what the built program
# says of itself: Debian's help2man turns `flink-gpu --help` and `--version` into the page (name,
# synopsis, description, global options, the list of subcommands), and a COMMANDS section made
# here from each `flink-gpu <subcommand> --help` gives every subcommand's usage, options and notes,
# which help2man alone would leave out. Run at build time by cmake/FlinkGpuPackage.cmake:
#
#   cmake -DFLINK_GPU=<program> -DHELP2MAN=<help2man> -DWORK_DIR=<folder> -DOUTPUT=<page.1.gz>
#         -DCOORDINATION_FILE=<path> -DPREFIX=<package prefix> -P FlinkGpuManPage.cmake
cmake_minimum_required(VERSION 3.25)

foreach(var FLINK_GPU HELP2MAN WORK_DIR OUTPUT COORDINATION_FILE PREFIX)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "${var} is not set")
  endif()
endforeach()
if(NOT EXISTS "${HELP2MAN}")
  message(FATAL_ERROR "help2man is not installed: the package's manual page is made with it "
                      "(scripts/install-deps.sh installs it)")
endif()

function(help_of out_var)
  execute_process(COMMAND "${FLINK_GPU}" ${ARGN} --help
    RESULT_VARIABLE exit_code OUTPUT_VARIABLE text ERROR_VARIABLE error TIMEOUT 60)
  if(NOT exit_code STREQUAL "0")
    message(FATAL_ERROR "flink-gpu ${ARGN} --help failed (${exit_code}): ${error}")
  endif()
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

# Text as roff: backslashes and minus signs escaped, no line starting with a control character.
function(roff text out_var)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REPLACE "-" "\\-" text "${text}")
  if(text MATCHES "^[.']")
    set(text "\\&${text}")
  endif()
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

# An option as help shows it ("-n,--amount UINT=1", "--vendor VENDOR:{nvidia,amd,intel}") as a
# .TP tag: its names bold, the value italic.
function(roff_option entry out_var)
  string(REGEX MATCH "^([^ ]+)( (.*))?$" ignored "${entry}")
  set(names "${CMAKE_MATCH_1}")
  set(value "${CMAKE_MATCH_3}")
  string(REPLACE "," ";" names "${names}")
  set(tag "")
  foreach(name IN LISTS names)
    roff("${name}" name)
    if(tag)
      string(APPEND tag ", ")
    endif()
    string(APPEND tag "\\fB${name}\\fR")
  endforeach()
  if(value)
    roff("${value}" value)
    string(APPEND tag " \\fI${value}\\fR")
  endif()
  set(${out_var} "${tag}" PARENT_SCOPE)
endfunction()

help_of(top_help)
# The footer every subcommand's help repeats (CLI11 shows the parent's): said once, in DESCRIPTION.
string(REGEX REPLACE "^.*\n\n(When FLINK_HOME[^\n]*(\n[^\n]+)*)\n*$" "\\1" common_footer "${top_help}")
string(REGEX REPLACE "^.*\nSubcommands:\n" "" listing "${top_help}")
string(REGEX MATCHALL "(^|\n)  [a-z][-a-z]*" subcommands "${listing}")
list(TRANSFORM subcommands STRIP)
if(NOT subcommands)
  message(FATAL_ERROR "flink-gpu --help lists no subcommands:\n${top_help}")
endif()

set(commands "")
foreach(subcommand IN LISTS subcommands)
  help_of(help ${subcommand})
  string(REPLACE "${common_footer}" "" help "${help}")
  # Lines as a list: semicolons kept as text.
  string(REPLACE ";" "\\;" help "${help}")
  string(REPLACE "\n" ";" lines "${help}")
  set(description "")
  set(usage "")
  set(section "description")
  set(body "")
  set(entry "")
  set(entry_text "")
  foreach(line IN LISTS lines)
    if(section STREQUAL "description" AND line MATCHES "^Usage: (.*)$")
      set(usage "${CMAKE_MATCH_1}")
      set(section "")
    elseif(section STREQUAL "description")
      string(APPEND description " ${line}")
    elseif(line MATCHES "^(Options|Positionals):$")
      set(section "entries")
    elseif(section STREQUAL "entries" AND entry AND line MATCHES "^                    +([^ ].*)$")
      # The description of a long entry, on the line after it.
      roff("${CMAKE_MATCH_1}" text)
      string(APPEND body ".TP\n${entry}\n${text}\n")
      set(entry "")
    elseif(section STREQUAL "entries" AND line MATCHES "^  ([^ ].*)$")
      # "  <names> <value>  <description>": the first two spaces in a row end the entry (CMake's
      # regular expressions have no lazy match); a long entry stands alone.
      set(rest "${CMAKE_MATCH_1}")
      string(FIND "${rest}" "  " gap)
      if(gap EQUAL -1)
        roff_option("${rest}" entry)
      else()
        string(SUBSTRING "${rest}" 0 ${gap} names)
        string(SUBSTRING "${rest}" ${gap} -1 text)
        string(STRIP "${text}" text)
        roff_option("${names}" tag)
        roff("${text}" text)
        string(APPEND body ".TP\n${tag}\n${text}\n")
      endif()
    elseif(line STREQUAL "")
      if(section STREQUAL "footer")
        string(APPEND body "\n")
      endif()
      set(section "gap")
    else()
      # A subcommand's own notes (exec's footer): a paragraph.
      if(NOT section STREQUAL "footer")
        string(APPEND body ".PP\n")
        set(section "footer")
      endif()
      roff("${line}" text)
      string(APPEND body "${text}\n")
    endif()
  endforeach()
  string(STRIP "${description}" description)
  roff("${description}" description)
  roff("${usage}" usage)
  string(APPEND commands ".SS \"${subcommand}\"\n.B ${usage}\n.PP\n${description}\n${body}")
endforeach()
string(REGEX REPLACE "\n\n+" "\n" commands "${commands}")

file(MAKE_DIRECTORY "${WORK_DIR}")
roff("${COORDINATION_FILE}" coordination)
roff("${PREFIX}" prefix)
file(WRITE "${WORK_DIR}/flink-gpu.h2m" "\
[NAME]
flink-gpu \\- Apache Flink's GPU discovery, and a host's GPU coordination, health and sharing
[COMMANDS]
${commands}\
[FILES]
.TP
.I ${coordination}
The host's coordination file, shared with Flink's own discovery script; beside it, its journal
(\\fI.journal\\fR), the health records (\\fI.health\\fR), the sharing declarations (\\fI.sharing\\fR), the lease
folder (\\fI.leases\\fR) and the watch lock (\\fI.watch\\fR).
.TP
.I ${prefix}/plugins/external\\-resource\\-gpu/nvidia\\-gpu\\-discovery.sh
The default discovery script, at Flink's default discovery\\-script.path.
.TP
.I /usr/lib/systemd/system/flink\\-gpu\\-watch.service
Runs \\fBflink\\-gpu watch\\fR for the host's whole life (disabled until enabled).
.TP
.I /usr/lib/systemd/system/flink\\-gpu\\-metrics.timer
Writes \\fBflink\\-gpu status \\-\\-format prometheus\\fR for node_exporter's textfile collector
every minute (disabled until enabled).
[SEE ALSO]
.BR systemctl (1),
.BR journalctl (1)
")

execute_process(
  COMMAND "${HELP2MAN}" --no-info --no-discard-stderr
          "--include=${WORK_DIR}/flink-gpu.h2m" "--output=${WORK_DIR}/flink-gpu.1"
          "${FLINK_GPU}"
  RESULT_VARIABLE exit_code ERROR_VARIABLE error TIMEOUT 120)
if(NOT exit_code STREQUAL "0")
  message(FATAL_ERROR "help2man failed (${exit_code}): ${error}")
endif()
execute_process(COMMAND gzip -9nc "${WORK_DIR}/flink-gpu.1"
  OUTPUT_FILE "${OUTPUT}" RESULT_VARIABLE exit_code)
if(NOT exit_code STREQUAL "0")
  message(FATAL_ERROR "gzip failed (${exit_code})")
endif()
