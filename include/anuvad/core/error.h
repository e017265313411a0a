// Exception types thrown by the anuvad library. Library code never exits: it throws one of these
// with a one-line message naming the file, line or field at fault; the CLI maps them to exit codes.
#pragma once

#include <stdexcept>
#include <string>

namespace anuvad {

/// Base of every anuvad error; what() is a single line meant for the user.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Bad model configuration or command-line option value.
struct ConfigError : Error {
  using Error::Error;
};
/// Tensor of the wrong shape passed to a layer or found in a model file.
struct ShapeError : Error {
  using Error::Error;
};
/// A file that cannot be opened, read or written.
struct IoError : Error {
  using Error::Error;
};
/// A corpus or input line that cannot be used (missing tab, empty side, invalid UTF-8 ...).
struct DataError : Error {
  using Error::Error;
};
/// A file that is not a valid anuvad model (bad header, missing tensor, wrong dtype ...).
struct ModelFileError : Error {
  using Error::Error;
};
/// SentencePiece training or loading failed.
struct TokenizerError : Error {
  using Error::Error;
};
/// Training diverged (NaN or Inf in the loss or a gradient).
struct NumericError : Error {
  using Error::Error;
};

}  // namespace anuvad

/// Always-on internal check: throws anuvad::ShapeError with file and line when `cond` is false.
#define ANUVAD_CHECK_SHAPE(cond, msg)                                                        \
  do {                                                                                       \
    if (!(cond))                                                                             \
      throw ::anuvad::ShapeError(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                                 ": " + (msg));                                              \
  } while (0)
