// One reader for every JSON data file nibble opens (bench results, the GPU database, calibrations,
// presets, Hugging Face config.json, fit and bench JSON for the law): each failure names the file,
// what the file is and what to do, so no reader has to wrap nlohmann's exceptions itself.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace nibble::io {

// The exception raised for a file that cannot be opened (missing, a folder, no permission). The io
// layer's own readers use std::runtime_error (binary_file.hpp), since the file system rather than the
// content is wrong; readers whose path is an option the user just typed report it as
// std::invalid_argument, like any other bad argument. The CLI prints both the same way.
enum class OpenError { runtime_error, invalid_argument };

// Reads and parses `path`. `what` says what the file is, in the words of a message ("GPU database",
// "Hugging Face config.json given to --hf-config"). Throws:
// - per `open_error`, when the file cannot be opened: "cannot open the <what> '<path>': <reason>; ...";
// - std::invalid_argument when the file is empty or only whitespace: "... is empty, not valid JSON";
// - std::invalid_argument on a syntax error: "<what> '<path>' is not valid JSON at line L, column C
//   (byte B): <nlohmann's detail>; ...", telling a file that ends early (truncated) from one that is
//   malformed;
// - std::invalid_argument for a number past double's range (nlohmann's out_of_range), naming the file.
nlohmann::json read_json_file(const std::string& path, std::string_view what,
                              OpenError open_error = OpenError::runtime_error);

// Line and column (both from 1) of the byte at 0-based `offset` of `text`; an offset past the end
// gives the position just after the last character.
struct TextPosition {
  size_t line = 1;
  size_t column = 1;
};
TextPosition text_position(std::string_view text, size_t offset);

}  // namespace nibble::io
