# Warnings for the project's own targets, and the sanitizer build.

function(flink_gpu_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-qual -Wformat=2)
  if(FLINK_GPU_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

if(FLINK_GPU_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
