// A scripted model for the real `pi` CLI, loaded with `-e`. It plays the tool calls listed in
// LAZY_AGENTS_SCRIPT (JSON: one array of [tool, args] pairs per assistant turn), then answers with
// every nested-instruction reminder it received, so a run shows exactly what reached the model.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import {
  fauxAssistantMessage,
  fauxProvider,
  fauxToolCall,
  type JsonObject,
  type TranscriptContext,
} from "@earendil-works/pi-ai";

type Turn = Array<[string, JsonObject]>;

function receivedReminders(context: TranscriptContext): string[] {
  const reminders: string[] = [];
  for (const message of context.messages) {
    if (message.role !== "toolResult") continue;
    for (const block of message.content) {
      if (block.type === "text" && block.text.startsWith("<nested-instructions")) {
        reminders.push(`[in the ${message.toolName} result]\n${block.text}`);
      }
    }
  }
  return reminders;
}

export default function scriptedProvider(pi: ExtensionAPI): void {
  const turns = JSON.parse(process.env.LAZY_AGENTS_SCRIPT ?? "[]") as Turn[];
  const faux = fauxProvider({ provider: "scripted", models: [{ id: "scripted-model" }], tokensPerSecond: 1_000_000 });
  faux.setResponses([
    ...turns.map((calls) =>
      fauxAssistantMessage(
        calls.map(([name, args]) => fauxToolCall(name, args)),
        { stopReason: "toolUse" },
      ),
    ),
    (context) => {
      // LAZY_AGENTS_ANSWER replaces the quote of every reminder with one short answer, as on a user's screen.
      if (process.env.LAZY_AGENTS_ANSWER) return fauxAssistantMessage(process.env.LAZY_AGENTS_ANSWER);
      const reminders = receivedReminders(context);
      return fauxAssistantMessage(
        `The model received ${reminders.length} reminder(s) from pi-lazy-agents.\n\n${reminders.join("\n\n")}`,
      );
    },
  ]);
  pi.registerProvider(faux.provider);
}
