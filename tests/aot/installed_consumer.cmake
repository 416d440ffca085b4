# ctest -R AOT.InstalledConsumerProject: installs kiln into a temporary prefix, configures and
# builds examples/c_consumer against it with find_package(kiln) (a separate CMake project, as an
# outside user would), and runs the C program. Inputs (-D): KILN_BUILD_DIR, KILN_SOURCE_DIR,
# WORK_DIR, GENERATOR, C_COMPILER, CXX_COMPILER, LAUNCHER (may be empty), SANITIZE_FLAGS (may be
# empty).
cmake_minimum_required(VERSION 3.25)

function(run_step what)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
    endif()
    set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run_step("installing kiln" ${CMAKE_COMMAND} --install ${KILN_BUILD_DIR} --prefix ${prefix})
foreach(f lib/cmake/kiln/kilnConfig.cmake lib/cmake/kiln/KilnKernel.cmake
          include/kiln/runtime/kiln_runtime.h include/kiln/driver/Generator.h
          include/kiln/kiln.h lib/libkiln_runtime.a lib/libkiln_generator.a)
    if(NOT EXISTS ${prefix}/${f})
        message(FATAL_ERROR "the install is missing ${f}")
    endif()
endforeach()

set(configure_args -S ${KILN_SOURCE_DIR}/examples/c_consumer -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(LAUNCHER)
    list(APPEND configure_args -DCMAKE_C_COMPILER_LAUNCHER=${LAUNCHER}
         -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
if(SANITIZE_FLAGS)
    list(APPEND configure_args "-DCMAKE_C_FLAGS=${SANITIZE_FLAGS}"
         "-DCMAKE_CXX_FLAGS=${SANITIZE_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE_FLAGS}")
endif()
run_step("configuring examples/c_consumer against the install" ${CMAKE_COMMAND} ${configure_args})
run_step("building examples/c_consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run_step("running c_consumer" ${WORK_DIR}/build/c_consumer)
if(NOT step_output MATCHES "c_consumer: ok")
    message(FATAL_ERROR "c_consumer did not print 'c_consumer: ok':\n${step_output}")
endif()
message(STATUS "${step_output}")
file(REMOVE_RECURSE ${WORK_DIR})
