// What a run trains on and what it keeps: subword sampling (--sentencepiece-alphas), several
// corpora at once (-t), the K best models and their average (--final-model average).
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "anuvad/core/error.h"
#include "anuvad/io/average.h"
#include "anuvad/io/model_file.h"
#include "anuvad/io/safetensors.h"
#include "anuvad/text/tokenizer.h"
#include "anuvad/train/best_models.h"
#include "anuvad/train/options.h"
#include "anuvad/train/subword_sampling.h"
#include "anuvad/train/validator.h"
#include "support/io_fixtures.h"
#include "support/tiny_config.h"

using namespace anuvad;
using namespace anuvad::test;
using Catch::Contains;

namespace {

/// The bundled training corpus's source or target sentences.
std::vector<std::string> side_of(const std::vector<SentencePair>& pairs, bool target) {
  std::vector<std::string> out;
  for (const auto& p : pairs) out.push_back(target ? p.tgt : p.src);
  return out;
}

/// A unigram tokenizer of one side of data/train.tsv (1000 pieces), trained once per process.
const Tokenizer& train_tokenizer(bool target) {
  static std::unique_ptr<Tokenizer> tok[2];
  if (!tok[target])
    tok[target] = std::make_unique<Tokenizer>(Tokenizer::train(side_of(bundled("train.tsv"), target), {}));
  return *tok[target];
}

}  // namespace

// =============================================================================================
// Subword sampling
// =============================================================================================

TEST_CASE("sampling: new segmentations of every training sentence, never a new text", "[train][sampling]") {
  for (bool target : {false, true}) {
    INFO((target ? "target" : "source") << " side");
    const Tokenizer& tok = train_tokenizer(target);
    const std::vector<std::string> texts = side_of(bundled("train.tsv"), target);
    const auto sampled = tok.sample_encode(texts, 0.1, 7);
    REQUIRE(sampled.size() == texts.size());
    size_t changed = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      INFO(bundled("train.tsv")[i].origin);
      // The normalized sentence (what read_parallel_corpus gives) comes back exactly.
      CHECK(tok.detokenize(sampled[i]) == texts[i]);
      changed += sampled[i] != tok.encode(texts[i]);
    }
    // Small alpha: most sentences of more than one piece get another segmentation.
    CHECK(changed > texts.size() / 2);
    // The same seed gives the same samples; another seed others.
    CHECK(tok.sample_encode(texts, 0.1, 7) == sampled);
    CHECK(tok.sample_encode(texts, 0.1, 8) != sampled);
  }
  CHECK_THROWS_AS(train_tokenizer(false).sample_encode({"a"}, 0, 1), TokenizerError);
}

TEST_CASE("sampling: epochs differ, an epoch is reproducible, alpha 0 keeps the best ids", "[train][sampling]") {
  const auto& corpus = bundled("train.tsv");
  const Tokenizer& src = train_tokenizer(false);
  const Tokenizer& tgt = train_tokenizer(true);
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& p : corpus) pairs.emplace_back(p.src, p.tgt);
  int skipped = 0;
  const std::vector<Example> best = make_examples(pairs, src, tgt, 255, &skipped);
  REQUIRE(skipped == 0);
  // Target side only: the source keeps exactly its best ids (alpha 0 = today's segmentation).
  SubwordSampler sampler(pairs, best, src, tgt, {0.0, 0.2}, 1, 255);
  const std::vector<Example> e1 = sampler.epoch(1);
  const std::vector<Example> e2 = sampler.epoch(2);
  size_t tgt_changed = 0;
  for (size_t i = 0; i < best.size(); ++i) {
    CHECK(e1[i].src == best[i].src);
    CHECK(tgt.detokenize(e1[i].tgt) == pairs[i].second);
    tgt_changed += e1[i].tgt != best[i].tgt;
  }
  CHECK(tgt_changed > best.size() / 2);
  CHECK(sampler.sampled_tokens() > sampler.best_tokens());  // smaller pieces on average
  bool differ = false;
  for (size_t i = 0; i < best.size(); ++i) differ |= e1[i].tgt != e2[i].tgt;
  CHECK(differ);
  // The same (seed, epoch) again, in another sampler and after other epochs: the same examples.
  SubwordSampler again(pairs, best, src, tgt, {0.0, 0.2}, 1, 255);
  (void)again.epoch(5);
  const std::vector<Example>& e1_again = again.epoch(1);
  for (size_t i = 0; i < best.size(); ++i) CHECK(e1_again[i].tgt == e1[i].tgt);
  // Another run seed samples otherwise.
  SubwordSampler other(pairs, best, src, tgt, {0.0, 0.2}, 2, 255);
  bool seed_differs = false;
  const std::vector<Example>& o1 = other.epoch(1);
  for (size_t i = 0; i < best.size(); ++i) seed_differs |= o1[i].tgt != e1[i].tgt;
  CHECK(seed_differs);
  // A sampled side longer than max_tokens keeps its best segmentation.
  SubwordSampler capped(pairs, best, src, tgt, {0.0, 5.0}, 1, 3);
  const std::vector<Example>& c1 = capped.epoch(1);
  for (size_t i = 0; i < best.size(); ++i)
    if (c1[i].tgt.size() > 3) CHECK(c1[i].tgt == best[i].tgt);
}

TEST_CASE("sampling: --sentencepiece-alphas values", "[train][sampling][options]") {
  TrainOptions o;
  CHECK(sentencepiece_alphas(o) == std::make_pair(0.0, 0.0));
  o.sentencepiece_alphas = {0.1};
  CHECK(sentencepiece_alphas(o) == std::make_pair(0.1, 0.1));
  o.sentencepiece_alphas = {0.1, 0.3};
  CHECK(sentencepiece_alphas(o) == std::make_pair(0.1, 0.3));
  o.sentencepiece_alphas = {0.1, 0.2, 0.3};
  CHECK_THROWS_WITH(sentencepiece_alphas(o), Contains("--sentencepiece-alphas"));
  o.sentencepiece_alphas = {-1};
  CHECK_THROWS_AS(sentencepiece_alphas(o), ConfigError);
  o.sentencepiece_alphas = {0.25};
  CHECK(training_options_json(o).at("sentencepiece_alphas") == nlohmann::json::array({0.25}));
  CHECK_FALSE(resume_fingerprint(o).contains("sentencepiece_alphas"));
}

// =============================================================================================
// Several corpora at once
// =============================================================================================

namespace {

/// A TSV corpus, an .en/.hi pair and a .src/.tgt pair in `dir`, two pairs each.
void write_three_corpora(const TempDir& dir) {
  write_file(dir.file("a.tsv"), "one\tएक\ntwo\tदो\n");
  write_file(dir.file("b.en"), "three\nfour\n");
  write_file(dir.file("b.hi"), "तीन\nचार\n");
  write_file(dir.file("c.src"), "five\nsix\n");
  write_file(dir.file("c.tgt"), "पाँच\nछह\n");
}

}  // namespace

TEST_CASE("corpora: the rules of a corpus list", "[io][corpus]") {
  using V = std::vector<std::string>;
  const auto kinds = [](const V& values) {
    std::string out;
    for (const CorpusSource& c : parse_corpus_list(values))
      out += c.tsv.empty() ? "[" + c.src + "|" + c.tgt + "]" : "<" + c.tsv + ">";
    return out;
  };
  CHECK(kinds({"a.tsv"}) == "<a.tsv>");
  CHECK(kinds({"x.txt"}) == "<x.txt>");
  CHECK(kinds({"b.en"}) == "[b.en|b.hi]");
  CHECK(kinds({"b.en", "b.hi"}) == "[b.en|b.hi]");            // today's two-path form
  CHECK(kinds({"c.src", "c.tgt"}) == "[c.src|c.tgt]");        // the same for any two names
  CHECK(kinds({"a.tsv", "b.tsv"}) == "<a.tsv><b.tsv>");
  CHECK(kinds({"b.en", "d.en"}) == "[b.en|b.hi][d.en|d.hi]");
  CHECK(kinds({"a.tsv", "b.en", "b.hi", "c.src,c.tgt"}) == "<a.tsv>[b.en|b.hi][c.src|c.tgt]");
  CHECK(kinds({"b.en", "a.tsv"}) == "[b.en|b.hi]<a.tsv>");
  CHECK(kinds({"c.src,c.tgt", "x.txt"}) == "[c.src|c.tgt]<x.txt>");
  CHECK(corpus_files({"a.tsv", "b.en", "c.src,c.tgt"}) == V{"a.tsv", "b.en", "b.hi", "c.src", "c.tgt"});
  CHECK_THROWS_WITH(parse_corpus_list({"a.tsv", "b.hi"}), Contains("b.hi") && Contains("without its source"));
  CHECK_THROWS_WITH(parse_corpus_list({"a,"}), Contains("SRC,TGT"));
  CHECK_THROWS_WITH(parse_corpus_list({"a,b,c"}), Contains("'a,b,c'"));
  CHECK_THROWS_AS(parse_corpus_list({}), DataError);
}

TEST_CASE("corpora: a list is read as the union of its corpora, errors name file and line", "[io][corpus]") {
  TempDir dir;
  write_three_corpora(dir);
  const auto pairs = read_parallel_corpus({dir.file("a.tsv"), dir.file("b.en"), dir.file("c.src") + "," + dir.file("c.tgt")});
  REQUIRE(pairs.size() == 6);
  CHECK(pairs[0].src == "one");
  CHECK(pairs[2].tgt == "तीन");
  CHECK(pairs[3].origin == dir.file("b.en") + ":2");
  CHECK(pairs[5].src == "six");
  CHECK(pairs[5].tgt == "छह");
  // The old two-path form still reads one pair of files.
  CHECK(read_parallel_corpus({dir.file("c.src"), dir.file("c.tgt")}).size() == 2);
  write_file(dir.file("bad.tsv"), "ok\tठीक\nno tab here\n");
  CHECK_THROWS_WITH(read_parallel_corpus({dir.file("a.tsv"), dir.file("bad.tsv")}),
                    Contains(dir.file("bad.tsv") + ":2") && Contains("no tab"));
  write_file(dir.file("empty.tsv"), "");
  CHECK_THROWS_WITH(read_parallel_corpus({dir.file("a.tsv"), dir.file("empty.tsv")}),
                    Contains(dir.file("empty.tsv") + ": corpus has no sentence pairs"));
  write_file(dir.file("d.en"), "x\n");
  CHECK_THROWS_AS(read_parallel_corpus({dir.file("a.tsv"), dir.file("d.en")}), IoError);  // no d.hi
}

// =============================================================================================
// The K best models and their average
// =============================================================================================

namespace {

/// A BestModels writer that writes only the metadata (an empty safetensors file).
void write_meta_only(const std::string& path, const std::map<std::string, std::string>& meta) {
  SafetensorsFile f;
  f.metadata = meta;
  write_safetensors(path, f);
}

/// The valid_step of each kept file, best first.
std::vector<int64_t> kept_steps(const BestModels& b) {
  std::vector<int64_t> out;
  for (const std::string& p : b.paths()) out.push_back(std::stoll(read_safetensors(p).metadata.at("valid_step")));
  return out;
}

}  // namespace

TEST_CASE("best models: the K best by the first metric, ranked in files, rebuilt on resume", "[train][average]") {
  TempDir dir;
  const std::string model = dir.file("m.safetensors");
  write_file(dir.file("m.best-chrf.safetensors"), "the best model: not one of the ranks");
  write_file(dir.file("m.best-chrf.7.safetensors"), "left by an earlier run");
  BestModels best(model, "chrf", /*lower_is_better=*/false, 3);
  best.clear();
  CHECK(dir.entries() == std::vector<std::string>{"m.best-chrf.safetensors"});
  CHECK(best.offer(1, 10.0, write_meta_only));
  CHECK(best.offer(2, 12.0, write_meta_only));
  CHECK(best.paths().size() == 2);  // fewer validations than K: what there is
  CHECK(best.offer(3, 11.0, write_meta_only));
  CHECK_FALSE(best.offer(4, 9.0, write_meta_only));   // worse than the 3rd
  CHECK_FALSE(best.offer(5, 10.0, write_meta_only));  // a tie does not displace
  CHECK(best.offer(6, 13.0, write_meta_only));
  CHECK(best.paths() == std::vector<std::string>{dir.file("m.best-chrf.1.safetensors"),
                                                 dir.file("m.best-chrf.2.safetensors"),
                                                 dir.file("m.best-chrf.3.safetensors")});
  CHECK(kept_steps(best) == std::vector<int64_t>{6, 2, 3});
  CHECK(read_safetensors(best.path(1)).metadata.at("valid_score") == "13");
  CHECK(read_safetensors(best.path(1)).metadata.at("valid_metric") == "chrf");
  // Resumed at step 4: the validation at step 6 is made again, the files before it are kept.
  BestModels resumed(model, "chrf", false, 3);
  resumed.restore(4);
  CHECK(kept_steps(resumed) == std::vector<int64_t>{2, 3});
  CHECK(dir.entries() == std::vector<std::string>{"m.best-chrf.1.safetensors", "m.best-chrf.2.safetensors",
                                                  "m.best-chrf.safetensors"});
  CHECK(resumed.offer(5, 11.5, write_meta_only));
  CHECK(kept_steps(resumed) == std::vector<int64_t>{2, 5, 3});
  // Lower is better for cross-entropy.
  BestModels ce(model, "cross-entropy", true, 2);
  CHECK(ce.offer(1, 3.0, write_meta_only));
  CHECK(ce.offer(2, 2.5, write_meta_only));
  CHECK_FALSE(ce.offer(3, 3.5, write_meta_only));
  CHECK(kept_steps(ce) == std::vector<int64_t>{2, 1});
  CHECK_THROWS_AS(BestModels(model, "chrf", false, 0), ConfigError);
}

TEST_CASE("best models: averaging K identical models is the identity, two different ones their mean", "[train][average]") {
  TempDir dir;
  ModelConfig cfg = tiny_config({0, 0, 16, 2, 32, 1, 1, 32});
  const Tokenizer& src = train_tokenizer(false);
  const Tokenizer& tgt = train_tokenizer(true);
  cfg.src_vocab_size = src.vocab_size();
  cfg.tgt_vocab_size = tgt.vocab_size();
  Transformer a(cfg), b(cfg);
  a.init_parameters(1);
  b.init_parameters(2);
  save_model(dir.file("a.safetensors"), a, src, tgt);
  save_model(dir.file("b.safetensors"), b, src, tgt);
  const std::vector<std::string> same(4, dir.file("a.safetensors"));
  average_model_files(same, dir.file("avg.safetensors"));
  const SafetensorsFile original = read_safetensors(dir.file("a.safetensors"));
  const SafetensorsFile averaged = read_safetensors(dir.file("avg.safetensors"));
  for (const auto& [name, t] : original.tensors) CHECK(averaged.tensors.at(name).bytes == t.bytes);
  CHECK(averaged.metadata.at("averaged_from") == nlohmann::json(same).dump());
  average_model_files({dir.file("a.safetensors"), dir.file("b.safetensors")}, dir.file("ab.safetensors"));
  const TranslationModel ab = load_model(dir.file("ab.safetensors"));
  const auto& pa = a.params().params();
  const auto& pb = b.params().params();
  const auto& pab = ab.transformer->params().params();
  for (size_t i = 0; i < pa.size(); ++i) {
    const Mat mean = ((pa[i].value.cast<double>() + pb[i].value.cast<double>()) / 2).cast<Scalar>();
    CHECK(pab[i].value == mean);
  }
}
