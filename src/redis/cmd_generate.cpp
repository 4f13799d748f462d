// INFER.GENERATE model {text | PROMPT text | TOKENS key [key ...] [PROMPT suffix] | CHAT role text ...}
//   [MAXTOKENS n] [TEMP t] [TOPK k] [TOPP p] [MINP p] [REPEAT-PENALTY r] [SEED s] [STOP s]... [TIMEOUT ms]
//   [FORMAT json | JSONSCHEMA schema | GRAMMAR gbnf] [WITHSTATS] [STREAM key]
//
// The handler parses, copies token keys out of the keyspace and hands the request to
// start_generation (generation_job.h), which blocks the client, submits, and replies from the result.
#include "redis/args.h"
#include "redis/commands.h"
#include "redis/generation_job.h"
#include "redis/models.h"
#include "redis/token_keys.h"
#include "tokenizer/chat_template.h"

namespace infer::redis {
namespace {

bool is_keyword(const RedisModuleString* s) {
  return is_word(s, "PROMPT") || is_word(s, "TOKENS") || is_word(s, "CHAT") || is_generation_option(s);
}

struct GenerateArgs {
  RedisModuleString* model = nullptr;
  RedisModuleString* prompt = nullptr;  // PROMPT text, or the suffix after TOKENS
  std::vector<RedisModuleString*> token_keys;
  std::vector<int> token_key_pos;
  std::vector<std::pair<RedisModuleString*, RedisModuleString*>> chat;
  GenerationOptions options;
};

// Parses argv without touching the keyspace (also used to answer the server's key-position queries).
bool parse(RedisModuleString** argv, int argc, GenerateArgs* a, std::string* err) {
  a->model = argv[1];
  a->options = default_generation_options();
  bool seen_prompt = false;
  for (int i = 2; i < argc; ++i) {
    RedisModuleString* w = argv[i];
    auto value = [&](const char* what) -> RedisModuleString* {
      if (i + 1 >= argc) {
        *err = std::string(what) + " needs a value";
        return nullptr;
      }
      return argv[++i];
    };
    if (i == 2 && !is_keyword(w)) {  // shorthand: INFER.GENERATE model "text" ...
      seen_prompt = true;
      a->prompt = w;
    } else if (is_word(w, "PROMPT")) {
      if (seen_prompt) return *err = "PROMPT given twice", false;
      if (!a->chat.empty()) return *err = "PROMPT cannot be combined with CHAT", false;
      seen_prompt = true;
      if (!(a->prompt = value("PROMPT"))) return false;
    } else if (is_word(w, "TOKENS")) {
      if (!a->token_keys.empty()) return *err = "TOKENS given twice", false;
      if (!a->chat.empty()) return *err = "TOKENS cannot be combined with CHAT", false;
      if (seen_prompt) return *err = "TOKENS must come before PROMPT (the prompt is a suffix to the tokens)", false;
      while (i + 1 < argc && !is_keyword(argv[i + 1])) {
        a->token_keys.push_back(argv[++i]);
        a->token_key_pos.push_back(i);
      }
      if (a->token_keys.empty()) return *err = "TOKENS needs at least one key", false;
    } else if (is_word(w, "CHAT")) {
      if (!a->chat.empty()) return *err = "CHAT given twice", false;
      if (seen_prompt || !a->token_keys.empty()) return *err = "CHAT cannot be combined with PROMPT or TOKENS", false;
      while (i + 2 < argc && !is_keyword(argv[i + 1])) {
        a->chat.emplace_back(argv[i + 1], argv[i + 2]);
        i += 2;
      }
      if (a->chat.empty()) return *err = "CHAT needs role/text pairs", false;
      if (i + 1 < argc && !is_keyword(argv[i + 1]))  // a last role without its text
        return *err = "CHAT needs role/text pairs: role '" + str(argv[i + 1]) + "' has no text", false;
    } else if (OptionParse p = parse_generation_option(argv, argc, &i, &a->options, err, kWithStats | kStream);
               p != OptionParse::NotOption) {
      if (p == OptionParse::Error) return false;
    } else {
      *err = unknown_option(argv, i, a->options);
      return false;
    }
  }
  if (!seen_prompt && a->token_keys.empty() && a->chat.empty()) {
    *err = "one of PROMPT text, TOKENS key [key ...] or CHAT role text ... is required";
    return false;
  }
  return true;
}

// Builds the engine request from parsed arguments, copying token keys now (invariant 3). Text (the
// prompt, a suffix after TOKENS, chat messages) is held by the job, not copied: *prepare turns it into
// the prompt on a background thread, *text_bytes says how long it is.
std::string build_request(RedisModuleCtx* ctx, const GenerateArgs& a, GenerationJob* job, engine::Request* req,
                          const char** code, PreparePrompt* prepare, size_t* text_bytes) {
  const LoadedModel& m = *job->model;
  const tokenizer::Tokenizer& tok = m.engine->tokenizer();
  const long long max_tokens = a.options.max_tokens;
  *text_bytes = 0;
  if (!a.token_keys.empty()) {
    // Keys past the context are refused by size before they are copied (the main thread holds them).
    const auto context = static_cast<size_t>(m.engine->options().context);
    for (RedisModuleString* key : a.token_keys) {
      KeyError e = read_token_key(ctx, key, tok, &req->prompt_ids, context);
      if (e) {
        *code = e.code;
        return e.message;
      }
    }
    const std::string_view suffix = a.prompt ? view(a.prompt) : std::string_view();
    if (req->prompt_ids.empty() && suffix.empty()) return "the token keys hold no tokens";
    if (std::string e = check_fits_context(m, req->prompt_ids.size(), max_tokens); !e.empty()) return e;
    if (!suffix.empty()) {
      const std::string_view held = job->hold(a.prompt);
      *text_bytes = held.size();
      *prepare = [&m, held, max_tokens](engine::Request& r) {
        tokenizer::EncodeOptions o;
        o.add_special = false;
        const tokenizer::Tokenizer& t = m.engine->tokenizer();
        // A suffix that cannot fit is refused before it is tokenised.
        if (std::string e = check_fits_context(m, r.prompt_ids.size() + t.min_tokens(held, o), max_tokens, "at least ");
            !e.empty())
          return e;
        // Room left (check_fits_context passed for the keys); tokenising stops soon after it is used up.
        const size_t room = static_cast<size_t>(m.engine->options().context - max_tokens) - r.prompt_ids.size();
        bool complete = true;
        std::vector<int32_t> ids = t.encode_at_most(held, room, o, &complete);
        r.prompt_ids.insert(r.prompt_ids.end(), ids.begin(), ids.end());
        return check_fits_context(m, r.prompt_ids.size(), max_tokens, complete ? "" : "at least ");
      };
    }
  } else if (!a.chat.empty()) {
    if (tok.chat_template().empty()) return "CHAT: the model has no chat template; use PROMPT";
    auto family = tokenizer::detect_chat_family(tok.chat_template());
    if (!family) return "CHAT: the model's chat template is of an unknown family; use PROMPT";
    std::vector<std::pair<std::string_view, std::string_view>> chat;
    for (const auto& [role, text] : a.chat) {
      chat.emplace_back(job->hold(role), job->hold(text));
      *text_bytes += chat.back().first.size() + chat.back().second.size();
    }
    *prepare = [family = *family, chat = std::move(chat)](engine::Request& r) {
      std::vector<tokenizer::ChatMessage> messages;
      for (const auto& [role, text] : chat) messages.push_back({std::string(role), std::string(text)});
      try {
        r.prompt_text = tokenizer::apply_chat_template(family, messages, /*add_generation_prompt=*/true);
      } catch (const std::invalid_argument& e) {
        return std::string("CHAT: ") + e.what();
      }
      return std::string();  // tokenised inside Engine::submit
    };
  } else {
    const std::string_view held = job->hold(a.prompt);
    *text_bytes = held.size();
    *prepare = [&m, held](engine::Request& r) {
      // A prompt that cannot fit is refused before it is copied (Engine::submit would tokenise it whole).
      if (std::string e = m.engine->refuse_prompt_text(held, false); !e.empty()) return e;
      r.prompt_text.assign(held);  // tokenised inside Engine::submit
      return std::string();
    };
  }
  apply_generation_options(a.options, req);
  return "";
}

int report_keys(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  GenerateArgs a;
  std::string err;
  if (argc < 3 || !parse(argv, argc, &a, &err)) return REDISMODULE_OK;  // the command will fail anyway
  for (int pos : a.token_key_pos) rm::KeyAtPosWithFlags(ctx, pos, REDISMODULE_CMD_KEY_RO | REDISMODULE_CMD_KEY_ACCESS);
  if (a.options.stream_key_pos > 0)
    rm::KeyAtPosWithFlags(ctx, a.options.stream_key_pos, REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_INSERT);
  return REDISMODULE_OK;
}

}  // namespace

int cmd_generate(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (rm::IsKeysPositionRequest(ctx)) return report_keys(ctx, argv, argc);
  if (argc < 3) return rm::WrongArity(ctx);
  GenerateArgs a;
  std::string err;
  if (!parse(argv, argc, &a, &err)) return reply_error(ctx, err);
  auto model = models().find(view(a.model));
  if (!model) return reply_error(ctx, "unknown model '" + str(a.model) + "' (see INFER.MODELS)");
  if (refuse_if_cannot_block(ctx, "INFER.GENERATE")) return REDISMODULE_OK;

  if (refuse_stream_key(ctx, a.options)) return REDISMODULE_OK;

  auto job = std::make_unique<GenerationJob>(model, "infer.generate");
  engine::Request req;
  const char* code = "ERR";
  PreparePrompt prepare;
  size_t text_bytes = 0;
  if (std::string e = build_request(ctx, a, job.get(), &req, &code, &prepare, &text_bytes); !e.empty())
    return reply_coded_error(ctx, code, e);

  configure_generation(ctx, job.get(), a.options);
  return start_generation(ctx, std::move(job), std::move(req), text_bytes, std::move(prepare));
}

}  // namespace infer::redis
