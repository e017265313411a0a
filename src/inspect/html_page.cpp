// What the inspect pages share: JSON embedded in a generated page, JSON error text, atomic writes.
#include "anuvad/inspect/html_page.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "anuvad/core/error.h"

namespace anuvad {

std::string page_with_json(const char* head, const std::string& json_text, const char* tail) {
  std::string page = head;
  page.reserve(page.size() + json_text.size() + json_text.size() / 50 + std::strlen(tail));
  for (char c : json_text) {
    if (c == '<')
      page += "\\u003c";
    else
      page += c;
  }
  page += tail;
  return page;
}

std::string json_error_text(const nlohmann::json::exception& e) {
  std::string what = e.what();
  const auto bracket = what.find("] ");  // drop nlohmann's "[json.exception.parse_error.101] "
  if (what.rfind("[json.exception", 0) == 0 && bracket != std::string::npos)
    what = what.substr(bracket + 2);
  for (char& c : what)
    if (c == '\n' || c == '\r') c = ' ';
  return what;
}

void write_atomically(const std::string& path, const std::string& content) {
  std::string tmpl = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw IoError(path + ": cannot create a temporary file: " + std::strerror(errno));
  ::fchmod(fd, 0644);
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmpl.c_str());
      throw IoError(path + ": write failed: " + why);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmpl.c_str());
    throw IoError(path + ": write failed: " + why);
  }
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmpl.c_str());
    throw IoError(path + ": cannot rename the temporary file into place: " + why);
  }
}

}  // namespace anuvad
