// Text read from a file, made safe to show in a message: a reader that quotes what it read (a JSON
// parser's "last read: '...'", a .npy header key, a CSV header) passes it through printable(), so a
// binary file never puts raw bytes on the user's terminal.
#pragma once
#include <string>
#include <string_view>

namespace nibble::io {

// `text` with every byte that is not printable ASCII or part of a valid UTF-8 character written as
// \xHH (lower-case hex), and backslashes as \\; printable text comes back unchanged.
std::string printable(std::string_view text);

}  // namespace nibble::io
