# The whole user_ops flow against an installed kiln, in a scratch folder:
#   cmake -DKILN_PREFIX=<kiln prefix> -DWORK_DIR=/tmp/user_ops [-DTRIALS=4] \
#         -P examples/user_ops/run_flow.cmake
# 1. configures this project (find_package(kiln)) and builds its generator executable;
# 2. tunes each operator at each of its shapes for TRIALS trials with the installed
#    `kiln tune --generator` into WORK_DIR/tuning_db/kiln.db;
# 3. writes the lockfile WORK_DIR/kiln.lock.json with `kiln lock update`;
# 4. builds the kernels from the database and runs the C program, which checks the answers;
# 5. removes the database, builds again in a fresh folder from the lockfile alone and runs the
#    C program again.
# Optional: GENERATOR, C_COMPILER, CXX_COMPILER, LAUNCHER (CMake generator, compilers, launcher
# for the example's build), SANITIZE_FLAGS (compile and link flags, for a sanitized kiln), JOBS
# (parallel build jobs).
cmake_minimum_required(VERSION 3.25)

if(NOT KILN_PREFIX OR NOT WORK_DIR)
    message(FATAL_ERROR "usage: cmake -DKILN_PREFIX=<kiln prefix> -DWORK_DIR=<scratch folder> "
                        "[-DTRIALS=n] -P run_flow.cmake")
endif()
if(NOT TRIALS)
    set(TRIALS 4)
endif()
set(source_dir ${CMAKE_CURRENT_LIST_DIR})
set(kiln ${KILN_PREFIX}/bin/kiln)
set(db ${WORK_DIR}/tuning_db/kiln.db)
set(lock ${WORK_DIR}/kiln.lock.json)

function(run_step what)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
    endif()
    set(step_output "${out}" PARENT_SCOPE)
endfunction()

function(configure build_dir)
    set(args -S ${source_dir} -B ${build_dir} -DCMAKE_BUILD_TYPE=Release
        -DCMAKE_PREFIX_PATH=${KILN_PREFIX} -DUSER_OPS_DB=${db} -DUSER_OPS_LOCK=${lock})
    if(GENERATOR)
        list(APPEND args -G ${GENERATOR})
    endif()
    if(C_COMPILER)
        list(APPEND args -DCMAKE_C_COMPILER=${C_COMPILER})
    endif()
    if(CXX_COMPILER)
        list(APPEND args -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
    endif()
    if(LAUNCHER)
        list(APPEND args -DCMAKE_C_COMPILER_LAUNCHER=${LAUNCHER}
             -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
    endif()
    if(SANITIZE_FLAGS)
        list(APPEND args "-DCMAKE_C_FLAGS=${SANITIZE_FLAGS}" "-DCMAKE_CXX_FLAGS=${SANITIZE_FLAGS}"
             "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZE_FLAGS}")
    endif()
    run_step("configuring ${source_dir} in ${build_dir}" ${CMAKE_COMMAND} ${args})
endfunction()

function(build build_dir)
    set(args)
    if(JOBS)
        set(args -j ${JOBS})
    endif()
    run_step("building ${build_dir} ${ARGN}" ${CMAKE_COMMAND} --build ${build_dir} ${args} ${ARGN})
endfunction()

# Runs the C program, prints its lines and each header's per-shape schedules, and checks that
# every tuned shape's schedule came from `source` (a regex: what the header says first).
function(run_and_report build_dir source)
    run_step("running ${build_dir}/user_ops" ${build_dir}/user_ops)
    if(NOT step_output MATCHES "user_ops: ok")
        message(FATAL_ERROR "user_ops did not print 'user_ops: ok':\n${step_output}")
    endif()
    message(STATUS "user_ops:\n${step_output}")
    set(provenance "")
    foreach(kernel_and_shapes "user_ops_bias_gelu|${USER_OPS_GELU_SHAPES}"
                              "user_ops_depthwise5x5|${USER_OPS_DEPTHWISE_SHAPES}")
        string(REPLACE "|" ";" parts "${kernel_and_shapes}")
        list(POP_FRONT parts kernel)
        file(GLOB_RECURSE header ${build_dir}/${kernel}.h)
        if(NOT header)
            message(FATAL_ERROR "no header ${kernel}.h under ${build_dir}")
        endif()
        file(STRINGS ${header} lines REGEX "^ \\*   ([0-9x]+|generic): ")
        list(JOIN lines "\n" text)
        string(APPEND provenance "${kernel}.h:\n${text}\n")
        foreach(shape IN LISTS parts)
            if(NOT text MATCHES "\\*   ${shape}: ${source}")
                message(FATAL_ERROR "${header}: the schedule of ${shape} is not from "
                                    "'${source}':\n${text}")
            endif()
        endforeach()
    endforeach()
    message(STATUS "per-shape schedules:\n${provenance}")
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/tuning_db)

# 1. The generator executable.
configure(${WORK_DIR}/build)
build(${WORK_DIR}/build --target user_ops_gen)
include(${WORK_DIR}/build/user_ops_shapes.cmake)
set(gen ${WORK_DIR}/build/user_ops_gen)

# 2. Tune: a few trials per operator and shape (random search, short measurements).
foreach(op_and_shapes "bias_gelu|${USER_OPS_GELU_SHAPES}"
                      "depthwise5x5|${USER_OPS_DEPTHWISE_SHAPES}")
    string(REPLACE "|" ";" parts "${op_and_shapes}")
    list(POP_FRONT parts op)
    set(lock_shapes)
    foreach(shape IN LISTS parts)
        run_step("kiln tune --generator ${gen} ${op} --shape ${shape}"
                 ${kiln} tune --generator ${gen} ${op} --shape ${shape} --trials ${TRIALS}
                 --db ${db} --strategy random --jobs 1 --min-time-ms 5 --remeasure 0)
        message(STATUS "kiln tune --generator user_ops_gen ${op} --shape ${shape} "
                       "--trials ${TRIALS}:\n${step_output}")
        list(APPEND lock_shapes --shape ${shape})
    endforeach()
    # 3. The lockfile: each shape's best schedule in the database.
    run_step("kiln lock update --generator ${gen} ${op}"
             ${kiln} lock update --generator ${gen} ${op} ${lock_shapes} --db ${db} --lock ${lock})
    message(STATUS "kiln lock update ${op}:\n${step_output}")
endforeach()
if(NOT EXISTS ${lock})
    message(FATAL_ERROR "kiln lock update wrote no ${lock}")
endif()

# 4. The kernels from the database (configured again: the database and lockfile now exist, so
# the kernels depend on them).
configure(${WORK_DIR}/build)
build(${WORK_DIR}/build)
run_and_report(${WORK_DIR}/build "database ${db}")

# 5. The same from the lockfile alone, in a fresh build folder.
file(REMOVE_RECURSE ${WORK_DIR}/tuning_db)
configure(${WORK_DIR}/build-lock)
build(${WORK_DIR}/build-lock)
run_and_report(${WORK_DIR}/build-lock "lockfile ${lock}")
message(STATUS "user_ops flow: ok")
