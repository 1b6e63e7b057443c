// Layer: report. Renders a BenchResult (measured or predicted) as terminal tables, CSV and a
// self-contained HTML page, compares two results, and writes files atomically.
#pragma once
#include "nibble/report/files.hpp"
#include "nibble/report/notes.hpp"
#include "nibble/report/render.hpp"
