// File reads with checked sizes, and atomic writes through a temporary plus rename.
#include "nibble/io/binary_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace nibble::io {

namespace fs = std::filesystem;

uint64_t file_size_of(const fs::path& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    throw std::runtime_error("cannot open '" + path.string() + "': no such file; check the path");
  }
  if (!fs::is_regular_file(status)) {
    throw std::runtime_error("'" + path.string() + "' is not a regular file; pass a .npy or .safetensors file");
  }
  const uint64_t size = fs::file_size(path, ec);
  if (ec) throw std::runtime_error("cannot read the size of '" + path.string() + "': " + ec.message());
  return size;
}

uint64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

void require_host_memory(uint64_t bytes, const std::string& what) {
  const uint64_t ram = host_memory_bytes();
  if (ram == 0 || bytes <= ram) return;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  char numbers[160];
  std::snprintf(numbers, sizeof numbers, " needs %llu bytes (%.1f GiB) but this machine has %.1f GiB of RAM",
                static_cast<unsigned long long>(bytes), static_cast<double>(bytes) / gib,
                static_cast<double>(ram) / gib);
  throw std::runtime_error(what + numbers + "; refused before allocating: use a machine with more memory or a "
                           "smaller tensor");
}

std::vector<uint8_t> read_file_range(const fs::path& path, uint64_t offset, uint64_t count) {
  const uint64_t size = file_size_of(path);
  if (offset > size || count > size - offset) {
    throw std::runtime_error("'" + path.string() + "' is truncated: need " + std::to_string(count) +
                             " bytes at offset " + std::to_string(offset) + " but the file has " +
                             std::to_string(size) + " bytes");
  }
  require_host_memory(count, "reading '" + path.string() + "' at offset " + std::to_string(offset));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open '" + path.string() + "' for reading: " + std::strerror(errno));
  std::vector<uint8_t> out(count);
  in.seekg(static_cast<std::streamoff>(offset));
  if (count) in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(count));
  if (!in || static_cast<uint64_t>(in.gcount()) != count) {
    throw std::runtime_error("reading '" + path.string() + "' failed after " + std::to_string(in.gcount()) +
                             " of " + std::to_string(count) + " bytes (file changed or unreadable)");
  }
  return out;
}

std::vector<uint8_t> read_whole_file(const fs::path& path) { return read_file_range(path, 0, file_size_of(path)); }

StagedFile::StagedFile(fs::path final_path)
    : final_(std::move(final_path)),
      temp_(final_.string() + ".tmp-" + std::to_string(static_cast<long long>(::getpid()))) {}

StagedFile::StagedFile(StagedFile&& other) noexcept
    : final_(std::move(other.final_)),
      temp_(std::move(other.temp_)),
      written_(other.written_),
      committed_(other.committed_) {
  other.written_ = false;
  other.committed_ = true;  // the moved-from object owns nothing to clean up
}

StagedFile::~StagedFile() {
  if (written_ && !committed_) {
    std::error_code ec;
    fs::remove(temp_, ec);  // best effort: a destructor must not throw
  }
}

void StagedFile::write(std::span<const uint8_t> bytes) {
  if (committed_) throw std::logic_error("StagedFile::write after commit: " + final_.string());
  written_ = true;  // from here on the destructor removes the temporary, even a partial one
  std::FILE* f = std::fopen(temp_.c_str(), "wb");
  if (!f) {
    throw std::runtime_error("cannot create '" + temp_.string() + "': " + std::strerror(errno) +
                             "; check that the output directory exists and is writable");
  }
  const size_t n = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool flushed = std::fflush(f) == 0;
  const int close_rc = std::fclose(f);
  if (n != bytes.size() || !flushed || close_rc != 0) {
    throw std::runtime_error("writing '" + temp_.string() + "' failed after " + std::to_string(n) + " of " +
                             std::to_string(bytes.size()) + " bytes (disk full?)");
  }
}

void StagedFile::commit() {
  if (!written_) throw std::logic_error("StagedFile::commit before write: " + final_.string());
  if (committed_) return;
  std::error_code ec;
  fs::rename(temp_, final_, ec);
  if (ec) {
    throw std::runtime_error("cannot move '" + temp_.string() + "' to '" + final_.string() + "': " + ec.message());
  }
  committed_ = true;
}

void write_file_atomic(const fs::path& path, std::span<const uint8_t> bytes) {
  StagedFile f(path);
  f.write(bytes);
  f.commit();
}

}  // namespace nibble::io
