// The one header kiln users include.
#pragma once

#include "driver/Pipeline.h"
#include "lang/BoundaryConditions.h"
#include "lang/Buffer.h"
#include "lang/Error.h"
#include "lang/Func.h"
#include "lang/IR.h"
#include "lang/IROperator.h"
#include "lang/IRPrinter.h"
#include "lang/Param.h"
#include "lang/Reduce.h"
#include "lang/ReferenceEvaluator.h"
#include "lang/Var.h"
#include "schedule/Lower.h"
#include "schedule/ScheduleTrace.h"
