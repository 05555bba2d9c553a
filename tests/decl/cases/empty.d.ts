declare const tools: {
};
