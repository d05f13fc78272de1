// iterion's pi extension: the interaction tools (ask_user, ask_user_async,
// await_answers) of a node, whose texts and decisions come from iterion
// (Go), and the node's provider key, handed over iterion's stdin rather
// than pi's environment.
//
// Everything travels over pi's extension-UI channel: a request and its
// answer through the input dialog, one-way messages through notify. The
// channel is shared with every other extension pi loaded, so each payload
// carries "__iterion" with the contract version, and iterion cancels any
// dialog without it. On a contract mismatch this extension registers
// nothing and says so loudly: half a set of tools is worse than none.
//
// The bundle (iterion-pi.js, built by `make pi-extension`) must have no
// runtime import: a sandbox has no node_modules of ours. The types below
// are the part of pi's extension API (0.73.1) this file uses.

const CONTRACT = 1;
const MARK = "__iterion";
const CONFIG_ENV = "ITERION_PI_EXTENSION";

interface TextContent {
	type: "text";
	text: string;
}

interface ToolResult {
	content: TextContent[];
	details: Record<string, unknown>;
	terminate?: boolean;
}

interface UI {
	input(title: string, placeholder?: string, opts?: { signal?: AbortSignal }): Promise<string | undefined>;
	notify(message: string, type?: "info" | "warning" | "error"): void;
}

interface ToolCallEvent {
	toolName: string;
	toolCallId: string;
	input: Record<string, unknown>;
}

interface Context {
	ui: UI;
	signal?: AbortSignal;
	model?: { provider: string; id: string };
	modelRegistry: { authStorage: { setRuntimeApiKey(provider: string, key: string): void } };
}

interface API {
	on(event: "session_start", handler: (event: unknown, ctx: Context) => void | Promise<void>): void;
	on(event: "input", handler: (event: unknown, ctx: Context) => Promise<{ action: "continue" }>): void;
	on(
		event: "tool_call",
		handler: (event: ToolCallEvent, ctx: Context) => Promise<{ block: true; reason: string } | undefined>,
	): void;
	registerTool(tool: {
		name: string;
		label: string;
		description: string;
		parameters: Record<string, unknown>;
		execute(
			toolCallId: string,
			params: Record<string, unknown>,
			signal: AbortSignal | undefined,
			onUpdate: unknown,
			ctx: Context,
		): Promise<ToolResult>;
	}): void;
}

// Config is what iterion writes into ITERION_PI_EXTENSION.
interface Config {
	[MARK]: number;
	tools: { name: string; description: string; parameters: Record<string, unknown> }[];
	// gate: every other tool call is decided by the workflow's permission
	// policy, in iterion.
	gate?: boolean;
}

// Reply is iterion's answer to a request.
interface Reply {
	[MARK]: number;
	text?: string;
	isError?: boolean;
	terminate?: boolean;
	block?: boolean;
	keys?: Record<string, string>;
}

function readConfig(): Config | undefined {
	const raw = process.env[CONFIG_ENV];
	delete process.env[CONFIG_ENV];
	if (!raw) return undefined;
	try {
		return JSON.parse(raw) as Config;
	} catch {
		return undefined;
	}
}

// request asks iterion and waits for its reply. No reply (the dialog
// cancelled, pi aborting) is an error: nothing is decided without iterion.
async function request(ctx: Context, payload: Record<string, unknown>, signal?: AbortSignal): Promise<Reply> {
	const value = await ctx.ui.input(JSON.stringify({ [MARK]: CONTRACT, ...payload }), "", { signal });
	if (value === undefined) {
		throw new Error("iterion did not answer this call (it was cancelled)");
	}
	let reply: Reply;
	try {
		reply = JSON.parse(value) as Reply;
	} catch {
		throw new Error("iterion's answer to this call is not JSON");
	}
	if (reply[MARK] !== CONTRACT) {
		throw new Error(`iterion answered with contract ${String(reply[MARK])}, this extension speaks ${CONTRACT}`);
	}
	return reply;
}

export default function iterion(pi: API): void {
	const config = readConfig();
	if (!config || config[MARK] !== CONTRACT) {
		const got = config ? String(config[MARK]) : "none";
		const text = `iterion's pi extension speaks contract ${CONTRACT} but iterion configured contract ${got}: it registers nothing (rebuild the binary and its extension together)`;
		console.error(text);
		pi.on("session_start", (_event, ctx) => {
			ctx.ui.notify(JSON.stringify({ [MARK]: CONTRACT, op: "mismatch", configured: got, message: text }), "error");
		});
		return;
	}

	pi.on("session_start", (_event, ctx) => {
		ctx.ui.notify(JSON.stringify({ [MARK]: CONTRACT, op: "ready", tools: config.tools.map((t) => t.name) }), "info");
	});

	// The provider key, asked for before pi checks that it has one.
	let keyed = false;
	pi.on("input", async (_event, ctx) => {
		if (!keyed) {
			keyed = true;
			const reply = await request(ctx, { op: "hello", provider: ctx.model?.provider ?? "" });
			for (const [provider, key] of Object.entries(reply.keys ?? {})) {
				ctx.modelRegistry.authStorage.setRuntimeApiKey(provider, key);
			}
		}
		return { action: "continue" };
	});

	// The permission gate: each call of another tool waits for iterion's
	// verdict. A call iterion does not answer is blocked (pi blocks a call
	// whose tool_call handler throws): a gate must fail closed.
	const own = new Set(config.tools.map((t) => t.name));
	if (config.gate) {
		pi.on("tool_call", async (event, ctx) => {
			if (own.has(event.toolName)) return undefined;
			const reply = await request(
				ctx,
				{ op: "permission", tool: event.toolName, toolCallId: event.toolCallId, input: event.input },
				ctx.signal,
			);
			return reply.block ? { block: true, reason: reply.text ?? "refused" } : undefined;
		});
	}

	for (const tool of config.tools) {
		pi.registerTool({
			name: tool.name,
			label: tool.name,
			description: tool.description,
			parameters: tool.parameters,
			async execute(toolCallId, params, signal, _onUpdate, ctx) {
				const reply = await request(ctx, { op: "tool", tool: tool.name, toolCallId, input: params }, signal);
				if (reply.isError) {
					throw new Error(reply.text ?? "failed");
				}
				return { content: [{ type: "text", text: reply.text ?? "" }], details: {}, terminate: reply.terminate === true };
			},
		});
	}
}
