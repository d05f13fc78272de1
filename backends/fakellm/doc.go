// Package fakellm is a scripted model server for tests and offline demos.
// It speaks the Anthropic Messages API (POST /v1/messages) and the OpenAI
// chat-completions API (POST /v1/chat/completions), streaming and not,
// closely enough that the official SDKs, Claude Code and pi take it for
// the real thing.
//
// # Script
//
// A Script lists turns: replies of text and/or tool calls, HTTP errors, or
// raw event streams. Each model request is answered by the first unused
// turn whose match holds; the turn is then used up unless it has repeat.
// A request no unused turn matches gets the fallback, and without one an
// HTTP 500 (with X-Should-Retry: false) whose message names the request
// and the unused turns: a script that runs short fails at once, it never
// hangs. As JSON:
//
//	{
//	  "turns": [
//	    {"name": "plan",
//	     "match": {"system": "You are the planner", "has_tool_result": false},
//	     "tool_calls": [{"name": "bash", "input": {"command": "ls"}}]},
//	    {"match": {"tool_result_for": "bash"}, "text": "PLAN: done"},
//	    {"match": {"dialect": "openai"}, "status": 429, "error": "slow down",
//	     "headers": {"Retry-After": "1"}},
//	    {"match": {"last_user_contains": "[Answer to question"},
//	     "text": "Thanks.", "usage": {"input_tokens": 120, "output_tokens": 3}},
//	    {"raw_sse": "event: message_start\ndata: {\"type\":\n\n"},
//	    {"match": {"model": "fast"}, "text": "ok", "repeat": true}
//	  ],
//	  "fallback": {"text": "DONE"}
//	}
//
// Turn fields: name, match, repeat, text, tool_calls ({id, name, input}),
// stop_reason, usage ({input_tokens, output_tokens}), status, error,
// raw_sse, headers. Match fields: system, contains, last_user_contains,
// has_tool_result, tool_result_for, tool, model, dialect. Their meaning is
// documented on Turn and Match; unknown fields are errors.
//
// # Wire format
//
// An Anthropic stream is message_start (with usage), then for each content
// block (the text first, then each tool call) content_block_start,
// content_block_delta pieces (text_delta, or input_json_delta pieces of
// the tool input's JSON) and content_block_stop, then message_delta (with
// stop_reason and usage) and message_stop; every event has an "event:"
// line. An OpenAI stream is "data: {chunk}" events: the role, content
// pieces, tool_calls pieces (index, id and name first, then arguments
// pieces), a last chunk with finish_reason, a usage chunk with empty
// choices when stream_options.include_usage is set, and "data: [DONE]".
// Generated ids are stable: msg_01fake000001, toolu_01fake000002,
// chatcmpl-fake000003, call_fake000004, numbered since New or Reset.
//
// # Recording
//
// Every model request is recorded (Server.Requests) with its decoded body
// and flattened system prompt, messages, tools and tool results, for
// assertions. Server.Unused tells which turns never answered.
//
// The command "iterion fake-model --script FILE" runs a Server as a
// process.
package fakellm
