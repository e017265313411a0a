// Writes an attention dump of a small random model for the page test (and for timing the page
// on large inputs), then prints on stdout: encoder_layers decoder_layers heads T S sentences
// (T, S: output and source tokens of sentence 0, EOS included).
//
//   attention_fixture OUT.json [--layers-enc N] [--layers-dec N] [--heads H] [--d-model D]
//                              [--src N] [--tgt N]
// Sentence 0 has N source and N target subwords (+ EOS each; default 7 and 9), sentence 1 is a
// shorter pair, sentence 2 an empty source that was not decoded (no attention).
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "anuvad/core/error.h"
#include "support/attention_fixture.h"

using namespace anuvad;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: attention_fixture OUT.json [--layers-enc N] [--layers-dec N] [--heads H] "
                 "[--d-model D] [--src N] [--tgt N]\n";
    return 2;
  }
  int enc = 2, dec = 3, heads = 4, d_model = 32, n_src = 7, n_tgt = 9;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (k == "--layers-enc") enc = v;
    else if (k == "--layers-dec") dec = v;
    else if (k == "--heads") heads = v;
    else if (k == "--d-model") d_model = v;
    else if (k == "--src") n_src = v;
    else if (k == "--tgt") n_tgt = v;
    else {
      std::cerr << "attention_fixture: unknown option " << k << "\n";
      return 2;
    }
  }
  try {
    ModelConfig cfg = test::attention_test_config(enc, dec, heads, d_model);
    cfg.max_positions = std::max({n_src, n_tgt, 8}) + 1;
    Transformer model(cfg);
    model.init_parameters(11);
    Example a, b;
    for (int i = 0; i < n_src; ++i) a.src.push_back(4 + (i * 7) % (cfg.src_vocab_size - 4));
    for (int i = 0; i < n_tgt; ++i) a.tgt.push_back(4 + (i * 3) % (cfg.tgt_vocab_size - 4));
    b.src = {4, 9, 10, 11};
    b.tgt = {4, 5, 6, 7};
    std::vector<double> lp_a, lp_b;
    const AttentionRecord ra = test::teacher_forced_record(model, a, &lp_a);
    const AttentionRecord rb = test::teacher_forced_record(model, b, &lp_b);
    std::vector<AttentionDumpSentence> sentences = {test::fixture_sentence(a, ra, lp_a),
                                                    test::fixture_sentence(b, rb, lp_b)};
    AttentionDumpSentence empty;  // empty source: not decoded, nothing recorded
    empty.src_ids = {kEosId};
    empty.src_pieces = {"</s>"};
    sentences.push_back(empty);
    DecodeOptions opts;
    opts.return_attention = true;
    write_attention_json(argv[1], make_attention_dump(cfg, opts, sentences));
    std::cout << enc << " " << dec << " " << heads << " " << a.tgt.size() + 1 << " "
              << a.src.size() + 1 << " " << sentences.size() << "\n";
  } catch (const Error& e) {
    std::cerr << "attention_fixture: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
