// Checkpoint averaging: the element-wise mean of the weights of model files of one run.
#pragma once

#include <string>
#include <vector>

#include "anuvad/io/model_file.h"

namespace anuvad {

/// The model of paths[0] with every parameter replaced by the element-wise mean over all the
/// model files (summed in double, so the mean does not depend on the rounding of partial float
/// sums). Throws ConfigError when `paths` is empty or a model's config or tokenizers differ
/// from the first's (naming both files), and what load_model throws.
TranslationModel average_models(const std::vector<std::string>& paths);

/// average_models(paths) written atomically to `output` (save_model) with the metadata
/// "averaged_from" = the JSON list of the paths.
void average_model_files(const std::vector<std::string>& paths, const std::string& output);

}  // namespace anuvad
