# README.md is read whole, on GitHub's front page: it stays within LIMIT bytes (8 KiB), and what
# does not fit goes to docs/.
#
# cmake -DFILE=README.md -DLIMIT=8192 -P ReadmeSize.cmake
file(SIZE "${FILE}" size)
if(size GREATER LIMIT)
  message(FATAL_ERROR "${FILE} is ${size} bytes, over its limit of ${LIMIT}: move detail to docs/")
endif()
message(STATUS "${FILE}: ${size} bytes of ${LIMIT}")
