# Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#
# CTest check (KernelStackFrames): compiles the kernel image for each architecture with ptxas's
# report and fails when a kernel has a stack frame above its ceiling here. The driver reserves a
# kernel's frame for every thread the GPU can hold (bytes x 2048 x SMs) once the kernel runs, and
# keeps it while the context lives: 288 B (clb_dev_direct before it lost its frame) would be 74 MiB on an H200.
# The collective kernels have no frame; the point-to-point kernels spill under their 64-register
# cap (p2p.cu says why the cap) and have the ceilings below (as ptxas of CUDA 13.0 gives them)
# until that is mended: bulk 88 B on sm_90 and later (23.8 MiB on an H200 once a large send runs),
# 144 B on sm_80/sm_89; the lean ones none on sm_90 and later, 8 B on sm_80 and 32 B on sm_89 (the
# peer-end check of their waits, p2p.cu, moved ptxas's spills there; sm_89 GPUs reach these kernels
# only for ranks that share a GPU or have peer access).
#   cmake -DNVCC=... -DSRC=<src/> -DARCHS="80;90;..." -DOUT=<dir> -P kernel_frames.cmake
set(ceiling_clb_dev_p2p 8)
set(ceiling_clb_dev_p2p_small 8)
set(ceiling_clb_dev_p2p_bulk 88)
set(ceiling_clb_dev_p2p_small_bulk 88)
set(ceiling_sm80_clb_dev_p2p_bulk 144)
set(ceiling_sm80_clb_dev_p2p_small_bulk 144)
set(ceiling_sm89_clb_dev_p2p_bulk 144)
set(ceiling_sm89_clb_dev_p2p_small_bulk 144)
set(ceiling_sm89_clb_dev_p2p 32)
set(ceiling_sm89_clb_dev_p2p_small 32)

set(failures "")
set(checked 0)
string(REPLACE "," ";" ARCHS "${ARCHS}")
foreach(arch ${ARCHS})
  execute_process(
    COMMAND ${NVCC} -std=c++17 -O3 -I${SRC} -cubin -gencode arch=compute_${arch},code=sm_${arch} -Xptxas -v
            -o ${OUT}/kernel_frames_sm${arch}.cubin ${SRC}/kernels/all_kernels.cu
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nvcc failed for sm_${arch}:\n${err}")
  endif()
  string(REPLACE "\n" ";" lines "${out}${err}")
  set(kernel "")
  foreach(line ${lines})
    if(line MATCHES "Function properties for ([A-Za-z0-9_]+)")
      set(kernel ${CMAKE_MATCH_1})
    elseif(line MATCHES "([0-9]+) bytes stack frame" AND kernel)
      set(frame ${CMAKE_MATCH_1})
      set(ceiling 0)
      if(DEFINED ceiling_sm${arch}_${kernel})
        set(ceiling ${ceiling_sm${arch}_${kernel}})
      elseif(DEFINED ceiling_${kernel})
        set(ceiling ${ceiling_${kernel}})
      endif()
      math(EXPR checked "${checked} + 1")
      if(frame GREATER ceiling)
        list(APPEND failures "sm_${arch} ${kernel}: ${frame} bytes of stack frame, at most ${ceiling} allowed")
      endif()
      set(kernel "")
    endif()
  endforeach()
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "ptxas reported no kernel: nothing was checked")
endif()
if(failures)
  string(REPLACE ";" "\n  " failures "${failures}")
  message(FATAL_ERROR "kernels with a stack frame (each costs bytes x 2048 x SMs of device memory once it runs;"
                      " keep indexed arrays in shared memory, see clbk::ReduceRange):\n  ${failures}")
endif()
message(STATUS "${checked} kernels checked: no stack frame above its ceiling")
