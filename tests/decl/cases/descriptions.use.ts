const sent = await tools.sendMail({ to: "a@example.com", subject: "Hi", cc: ["b@example.com"] });
const id: string = sent.messageId;
void id;
// @ts-expect-error: the escaped "*/" keeps this inside the doc comment
void evil;
