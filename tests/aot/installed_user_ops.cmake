# ctest -R AOT.InstalledUserOps: installs kiln into a temporary prefix and runs the user_ops
# example's whole flow against it (examples/user_ops/run_flow.cmake): tune two generators with
# the installed kiln, lock, build from the database, call from C, build again from the lockfile
# alone and call again. Its tuning lines, the C program's checks and the headers' per-shape
# schedules are printed (ctest -V). Inputs (-D): KILN_BUILD_DIR, KILN_SOURCE_DIR, WORK_DIR,
# GENERATOR, C_COMPILER, CXX_COMPILER, LAUNCHER and SANITIZE_FLAGS (may be empty), TRIALS.
cmake_minimum_required(VERSION 3.25)

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${KILN_BUILD_DIR} --prefix ${prefix}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "installing kiln failed (${rc}):\n${out}")
endif()
if(NOT EXISTS ${prefix}/bin/kiln)
    message(FATAL_ERROR "the install has no bin/kiln")
endif()

execute_process(COMMAND ${CMAKE_COMMAND} -DKILN_PREFIX=${prefix} -DWORK_DIR=${WORK_DIR}/flow
                        -DTRIALS=${TRIALS} -DGENERATOR=${GENERATOR} -DC_COMPILER=${C_COMPILER}
                        -DCXX_COMPILER=${CXX_COMPILER} -DLAUNCHER=${LAUNCHER} -DJOBS=2
                        "-DSANITIZE_FLAGS=${SANITIZE_FLAGS}"
                        -P ${KILN_SOURCE_DIR}/examples/user_ops/run_flow.cmake
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the user_ops flow failed (${rc})")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
