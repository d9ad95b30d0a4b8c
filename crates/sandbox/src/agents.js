// `agents`, the guest's sub-agents. Evaluated the first time a run's program
// reads `agents` (in its own script, so it shifts no position of the
// program's) and called with the built-ins it uses, captured before the
// program ran (so a program that replaces them changes nothing here), and the
// run's functions for run_subtask, start_subtask and wait_subtasks
// (`undefined` for one the run does not have). Each method is exactly one
// call of one of them, so the host's ladder decides, counts and scrubs it
// like any other tool call.
(function (originals, runSubtask, startSubtask, waitSubtasks) {
  "use strict";
  const { freeze, NoTool } = originals;

  const call = (tool, method, name, args) => {
    if (tool === undefined) {
      throw new NoTool(`agents.${method} needs tools.${name}, which this run does not have`);
    }
    return tool(args);
  };
  const object = (value) => (value !== null && typeof value === "object" ? value : {});
  const childArgs = (prompt, options) => {
    const given = object(options);
    const args = { prompt };
    if (given.outputSchema !== undefined) args.output_schema = given.outputSchema;
    if (given.tools !== undefined) args.tools = given.tools;
    if (given.agent !== undefined) args.agent = given.agent;
    return args;
  };

  const agents = {
    __proto__: null,
    async run(prompt, options) {
      return call(runSubtask, "run", "run_subtask", childArgs(prompt, options));
    },
    async start(prompt, options) {
      return object(await call(startSubtask, "start", "start_subtask", childArgs(prompt, options))).subtask_id;
    },
    async wait(options) {
      const given = object(options);
      const args = {};
      if (given.ids !== undefined) args.ids = given.ids;
      if (given.timeoutMs !== undefined) args.timeout_ms = given.timeoutMs;
      return call(waitSubtasks, "wait", "wait_subtasks", args);
    },
  };
  // Not a loop over an array: the program may have replaced its iterator.
  freeze(agents.run);
  freeze(agents.start);
  freeze(agents.wait);
  return freeze(agents);
})
