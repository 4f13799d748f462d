// INFER.GENERATE model {text | PROMPT text | TOKENS key [key ...] [PROMPT suffix] | CHAT role text ... |
//   MESSAGES json} [TOOLS json [TOOLCHOICE auto|none|required|name]] [CHATARGS json] [TEMPLATE name]
//   [MAXTOKENS n] [TEMP t] [TOPK k] [TOPP p] [MINP p] [REPEAT-PENALTY r] [SEED s] [STOP s]... [TIMEOUT ms]
//   [LOGPROBS n] [FORMAT json | JSONSCHEMA schema | GRAMMAR gbnf] [WITHSTATS] [STREAM key]
//   [CACHE key [THRESHOLD similarity] [TTL seconds] [SAMPLED]] [EMBEDDER name]
//
// The handler parses, copies token keys out of the keyspace and hands the request to
// start_generation (generation_job.h), which blocks the client, submits, and replies from the result.
// A chat (CHAT or MESSAGES) is rendered through the model's chat template and tokenised on the
// background thread (chat_args.h). CACHE (semantic_cache.h) embeds the prepared prompt (a chat as
// rendered) with the model, or with EMBEDDER name, and looks it up before generating.
#include "redis/args.h"
#include "redis/chat_args.h"
#include "redis/commands.h"
#include "redis/generation_job.h"
#include "redis/models.h"
#include "redis/token_keys.h"

namespace infer::redis {
namespace {

bool is_keyword(const RedisModuleString* s) {
  return is_word(s, "PROMPT") || is_word(s, "TOKENS") || is_word(s, "CHAT") || is_word(s, "EMBEDDER") ||
         is_chat_option(s) || is_generation_option(s);
}

struct GenerateArgs {
  RedisModuleString* model = nullptr;
  RedisModuleString* prompt = nullptr;  // PROMPT text, or the suffix after TOKENS
  std::vector<RedisModuleString*> token_keys;
  std::vector<int> token_key_pos;
  std::vector<std::pair<RedisModuleString*, RedisModuleString*>> chat;
  ChatOptions chat_options;  // MESSAGES, TOOLS, CHATARGS, TEMPLATE
  RedisModuleString* embedder = nullptr;  // EMBEDDER name: embeds the prompt for CACHE
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
        *err = needs_value(what);
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
      if (a->chat_options.messages) return *err = "PROMPT cannot be combined with MESSAGES", false;
      seen_prompt = true;
      if (!(a->prompt = value("PROMPT"))) return false;
    } else if (is_word(w, "TOKENS")) {
      if (!a->token_keys.empty()) return *err = "TOKENS given twice", false;
      if (!a->chat.empty()) return *err = "TOKENS cannot be combined with CHAT", false;
      if (a->chat_options.messages) return *err = "TOKENS cannot be combined with MESSAGES", false;
      if (seen_prompt) return *err = "TOKENS must come before PROMPT (the prompt is a suffix to the tokens)", false;
      while (i + 1 < argc && !is_keyword(argv[i + 1])) {
        a->token_keys.push_back(argv[++i]);
        a->token_key_pos.push_back(i);
      }
      if (a->token_keys.empty()) return *err = "TOKENS needs at least one key", false;
    } else if (is_word(w, "CHAT")) {
      if (!a->chat.empty()) return *err = "CHAT given twice", false;
      if (seen_prompt || !a->token_keys.empty()) return *err = "CHAT cannot be combined with PROMPT or TOKENS", false;
      if (a->chat_options.messages) return *err = "CHAT cannot be combined with MESSAGES", false;
      while (i + 2 < argc && !is_keyword(argv[i + 1])) {
        a->chat.emplace_back(argv[i + 1], argv[i + 2]);
        i += 2;
      }
      if (a->chat.empty()) return *err = "CHAT needs role/text pairs", false;
      if (i + 1 < argc && !is_keyword(argv[i + 1]))  // a last role without its text
        return *err = "CHAT needs role/text pairs: role '" + str(argv[i + 1]) + "' has no text", false;
    } else if (is_word(w, "EMBEDDER")) {
      if (a->embedder) return *err = "EMBEDDER given twice", false;
      if (!(a->embedder = value("EMBEDDER"))) return false;
    } else if (ChatParse c = parse_chat_option(argv, argc, &i, &a->chat_options, err,
                                               {"MESSAGES", "TOOLS", "CHATARGS", "TEMPLATE", "TOOLCHOICE"});
               c != ChatParse::NotOption) {
      if (c == ChatParse::Error) return false;
      if (a->chat_options.messages && argv[i] == a->chat_options.messages) {
        if (!a->chat.empty()) return *err = "MESSAGES cannot be combined with CHAT", false;
        if (seen_prompt || !a->token_keys.empty()) return *err = "MESSAGES cannot be combined with PROMPT or TOKENS", false;
      }
    } else if (OptionParse p = parse_generation_option(argv, argc, &i, &a->options, err, kWithStats | kStream | kCache);
               p != OptionParse::NotOption) {
      if (p == OptionParse::Error) return false;
    } else {
      *err = unknown_option(argv, i, a->options);
      return false;
    }
  }
  const ChatOptions& c = a->chat_options;
  if (!seen_prompt && a->token_keys.empty() && a->chat.empty() && !c.messages) {
    *err = "one of PROMPT text, TOKENS key [key ...], CHAT role text ... or MESSAGES json is required";
    return false;
  }
  if (a->chat.empty() && !c.messages) {
    for (const auto& [given, name] : {std::pair{c.tools, "TOOLS"}, {c.chat_args, "CHATARGS"}, {c.template_name, "TEMPLATE"}})
      if (given) return *err = std::string(name) + " needs a chat: CHAT role text ... or MESSAGES json", false;
  }
  if (std::string why = check_tool_choice(c, a->options); !why.empty()) return *err = why, false;
  if (a->embedder && !a->options.cache.key)
    return *err = "EMBEDDER needs CACHE: INFER.GENERATE embeds the prompt only to look it up in a cache", false;
  if (a->options.cache.key && !a->token_keys.empty())
    return *err = "CACHE needs a text prompt (PROMPT, CHAT or MESSAGES): a TOKENS prompt is not cached", false;
  if (std::string why = check_generation_options(a->options); !why.empty()) return *err = why, false;
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
    if (std::string e = m.engine->refuse_generation_length(req->prompt_ids.size(), max_tokens, false); !e.empty())
      return e;
    if (!suffix.empty()) {
      const std::string_view held = job->hold(a.prompt);
      *text_bytes = held.size();
      *prepare = [&m, held, max_tokens](engine::Request& r) {
        tokenizer::EncodeOptions o;
        o.add_special = false;
        const tokenizer::Tokenizer& t = m.engine->tokenizer();
        // A suffix that cannot fit is refused before it is tokenised.
        if (std::string e = m.engine->refuse_generation_length(r.prompt_ids.size() + t.min_tokens(held, o), max_tokens, true);
            !e.empty())
          return e;
        // Room left (refuse_generation_length passed for the keys); tokenising stops soon after it is used up.
        const size_t room = static_cast<size_t>(m.engine->options().context - max_tokens) - r.prompt_ids.size();
        bool complete = true;
        std::vector<int32_t> ids = t.encode_at_most(held, room, o, &complete);
        r.prompt_ids.insert(r.prompt_ids.end(), ids.begin(), ids.end());
        return m.engine->refuse_generation_length(r.prompt_ids.size(), max_tokens, !complete);
      };
    }
  } else if (!a.chat.empty() || a.chat_options.messages) {
    ChatInputs chat;
    for (const auto& [role, text] : a.chat) {
      chat.pairs.emplace_back(job->hold(role), job->hold(text));
      *text_bytes += chat.pairs.back().first.size() + chat.pairs.back().second.size();
    }
    *text_bytes += chat.hold(job, a.chat_options);
    *prepare = [&m, job, chat = std::move(chat)](engine::Request& r) {
      const engine::Engine& e = *m.engine;
      std::string text;
      try {
        text = chat.render(e, job);
      } catch (const engine::ChatError& ex) {
        return std::string(ex.what());
      }
      if (job->cache && job->cache->embedder) job->cache->text = text;  // what another model embeds
      // A rendering that cannot fit is refused before it is tokenised, and tokenising stops soon after
      // the context is used up.
      if (std::string why = e.refuse_prompt_text(text, false); !why.empty()) return why;
      const tokenizer::Tokenizer& t = e.tokenizer();
      bool complete = true;
      r.prompt_ids = t.encode_at_most(text, e.max_prompt_tokens(false), engine::chat_encode_options(t, text), &complete);
      if (!complete) return e.refuse_prompt_length(r.prompt_ids.size(), false, true);
      if (r.prompt_ids.empty()) return chat.keyword + ": the chat template rendered an empty prompt";
      return std::string();
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
  if (a.options.cache.key_pos > 0) report_cache_key(ctx, a.options.cache.key_pos);
  return REDISMODULE_OK;
}

// Everything of the request but its prompt that changes the answer (semantic_cache.h).
std::string cache_fingerprint(const GenerateArgs& a, const LoadedModel& m, const LoadedModel& embedder) {
  Fingerprint f;
  f.add("command", "INFER.GENERATE");
  f.add("model", model_identity(m));
  f.add("embedder", model_identity(embedder));
  const ChatOptions& c = a.chat_options;
  f.add("input", c.messages ? "messages" : !a.chat.empty() ? "chat" : "prompt");
  for (const auto& [name, given] : {std::pair{"template", c.template_name}, {"chatargs", c.chat_args},
                                    {"tools", c.tools}, {"toolchoice", c.tool_choice}})
    f.add(name, given ? view(given) : std::string_view());
  add_generation_fingerprint(&f, a.options);
  return f.hex();
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
  std::shared_ptr<const LoadedModel> embedder = model;
  if (a.embedder) {
    embedder = models().find(view(a.embedder));
    if (!embedder) return reply_error(ctx, "unknown EMBEDDER model '" + str(a.embedder) + "' (see INFER.MODELS)");
  }
  if (refuse_cache_key(ctx, a.options, a.chat_options, *embedder)) return REDISMODULE_OK;

  auto job = std::make_unique<GenerationJob>(model, "infer.generate");
  engine::Request req;
  const char* code = "ERR";
  PreparePrompt prepare;
  size_t text_bytes = 0;
  if (std::string e = build_request(ctx, a, job.get(), &req, &code, &prepare, &text_bytes); !e.empty())
    return reply_coded_error(ctx, code, e);

  configure_generation(ctx, job.get(), a.options, a.options.cache.key ? cache_fingerprint(a, *model, *embedder) : "");
  if (job->cache && embedder != model) job->cache->embedder = embedder;
  return start_generation(ctx, std::move(job), std::move(req), text_bytes, std::move(prepare));
}

}  // namespace infer::redis
