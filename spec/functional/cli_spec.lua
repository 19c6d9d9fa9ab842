-- Functional specs of the `ludo` command (runtime/cli/): `ludo help` covers
-- every option the parsers accept, host libraries (manifest.json and
-- --host-lib, runtime/cli/hostlib.c), strict observation checks, and the
-- gameloop example that docs/embedding.md shows. They run the built
-- binaries ($LUDO_BUILD, default build/) from the source tree.
local cli = require("cliutil")
local ROOT, BUILD, LUDO = cli.ROOT, cli.BUILD, cli.LUDO
local slurp, quote, sh, ludo = cli.slurp, cli.quote, cli.sh, cli.ludo
local contains = cli.contains

-- The options a help text documents: name -> value name or false, from
-- the lines of its "options:" section ("  -v, --verbose", "  --seed S").
local function documented(help)
  local opts, inside = {}, false
  for line in help:gmatch("[^\n]*") do
    if line == "options:" then
      inside = true
    elseif inside and line == "" then
      inside = false
    elseif inside and line:match("^  %-") then
      local names = line:match("^  (%S.-)%s%s") or line:match("^  (.*)$")
      local arg = names:match(" (%u[%u/]*)$") or false
      names = names:gsub(" %u[%u/]*$", "")
      for flag in names:gmatch("%-%-?[%w-]+") do opts[flag] = arg end
    end
  end
  return opts
end

-- The commands `ludo help` lists.
local function commands()
  local _, help = ludo("help")
  local list, inside = {}, false
  for line in help:gmatch("[^\n]*") do
    if line == "commands:" then
      inside = true
    elseif inside and line == "" then
      inside = false
    elseif inside then
      list[#list + 1] = line:match("^  (%S+)")
    end
  end
  return list
end

describe("ludo help", function()
  it("lists every command, and documents each like COMMAND --help",
    function()
      local list = commands()
      assert.are.same({ "run", "eval", "serve", "client", "lua-path",
        "help" }, list)
      for _, c in ipairs(list) do
        local code, help = ludo("help", c)
        assert.are.equal(0, code)
        local code2, help2 = ludo(c, "--help")
        assert.are.equal(0, code2)
        assert.are.equal(help, help2)
        contains(help, "usage: ludo " .. c)
        assert.is_truthy(next(documented(help)), c .. " documents nothing")
      end
    end)

  it("documents only options the parser accepts, with or without a value "
    .. "as documented", function()
    local targets = { { "" } }
    for _, c in ipairs(commands()) do targets[#targets + 1] = { c } end
    for _, t in ipairs(targets) do
      local c = t[1]
      local _, help = ludo("help", c ~= "" and c or nil)
      local opts = documented(help)
      for flag, arg in pairs(opts) do
        local args = c ~= "" and { c } or {}
        if arg then
          -- Without its value: the parser asks for it by name.
          args[#args + 1] = flag
          local code, _, err = ludo(table.unpack(args))
          assert.are.equal(2, code, c .. " " .. flag)
          contains(err, flag .. " needs a value")
          -- With one: never an unknown option.
          args[#args + 1] = "1"
          _, _, err = ludo(table.unpack(args))
          assert.is_falsy(err:find("unknown option", 1, true),
            c .. " " .. flag .. ": " .. err)
        else
          args[#args + 1] = flag .. "=x"
          if flag:sub(1, 2) == "--" then
            local code, _, err = ludo(table.unpack(args))
            assert.are.equal(2, code, c .. " " .. flag)
            contains(err, flag .. " takes no value")
          end
          args[#args] = flag
          local _, _, err = ludo(table.unpack(args))
          assert.is_falsy(err:find("unknown option", 1, true),
            c .. " " .. flag .. ": " .. err)
        end
      end
    end
  end)

  it("documents every option named in the CLI's source", function()
    local all = documented(select(2, ludo("help")))
    for _, c in ipairs(commands()) do
      for flag in pairs(documented(select(2, ludo("help", c)))) do
        all[flag] = true
      end
    end
    local files = io.popen("ls " .. ROOT .. "/runtime/cli/*.c")
    local seen = 0
    for file in files:lines() do
      local src = slurp(file)
      for flag in src:gmatch('"(%-%-?%a[%w-]*)"') do
        seen = seen + 1
        assert.is_not_nil(all[flag], flag .. " (" .. file .. ") is not in "
          .. "any help text")
      end
    end
    files:close()
    assert.is_true(seen >= 15, "found only " .. seen .. " option names")
  end)

  it("refuses unknown commands, options and help topics with exit 2",
    function()
      local code, _, err = ludo("help", "nosuch")
      assert.are.equal(2, code)
      contains(err, "no command 'nosuch'")
      code, _, err = ludo("run", "examples/echo", "--bogus")
      assert.are.equal(2, code)
      contains(err, "unknown option '--bogus' (see ludo help run)")
      code, _, err = ludo("frobnicate")
      assert.are.equal(2, code)
      contains(err, "unknown command 'frobnicate'")
    end)

  it("takes --name=value as well as --name value, and -- ends options",
    function()
      local code, out = ludo("run", "--episodes=2", "--seed", "3",
        "--max-steps=2", "--json", "--", "examples/echo")
      assert.are.equal(0, code)
      local n = 0
      for _ in out:gmatch('"episode":') do n = n + 1 end
      assert.are.equal(2, n)
    end)
end)

describe("host libraries", function()
  local fixtures = BUILD .. "/fixtures/"

  it("run the gridworld through the library its manifest names", function()
    local code, out, err = ludo("run", "examples/gridworld", "--episodes",
      "2", "--seed", "1", "--json")
    assert.are.equal(0, code, err)
    local n = 0
    for line in out:gmatch("[^\n]+") do
      n = n + 1
      contains(line, '"done":true,"failed":false')
    end
    assert.are.equal(2, n)
  end)

  it("resolve a manifest's relative path against the environment's folder",
    function()
      local dir = os.tmpname()
      os.remove(dir)
      assert(os.execute("mkdir -p " .. quote(dir .. "/lib")))
      for _, f in ipairs({ "env.lua", "rubric.lua" }) do
        assert(os.execute("cp " .. quote(ROOT .. "/examples/gridworld/" .. f)
          .. " " .. quote(dir)))
      end
      assert(os.execute("cp " .. quote(BUILD .. "/gridworld-host.so") .. " "
        .. quote(dir .. "/lib/grid.so")))
      local f = assert(io.open(dir .. "/manifest.json", "w"))
      f:write('{"host_lib": "lib/grid.so"}\n')
      f:close()
      -- From another working directory.
      local code, out, err = sh("cd / && " .. quote(LUDO) .. " run "
        .. quote(dir) .. " --seed 4")
      os.execute("rm -rf " .. quote(dir))
      assert.are.equal(0, code, err)
      contains(out, "1 episodes, 0 failed")
    end)

  it("need the library: without it the environment cannot load", function()
    local code, _, err = ludo("run", "examples/gridworld", "--host-lib",
      fixtures .. "hostlib-nosym.so")
    assert.are.equal(1, code)
    contains(err, "does not export ludo_host_init")
    code, _, err = ludo("run", "examples/gridworld", "--no-host-lib")
    assert.are.equal(1, code)
    contains(err, "examples/gridworld/manifest.json names the host library "
      .. "gridworld-host.so, and --no-host-lib forbids loading native code")
    code, _, err = ludo("run", "examples/gridworld", "--no-host-lib",
      "--host-lib", BUILD .. "/gridworld-host.so")
    assert.are.equal(2, code)
    contains(err, "contradict")
  end)

  it("report a missing file, a file that is not a library, and a failed "
    .. "init, naming the file", function()
      local code, _, err = ludo("run", "examples/echo", "--host-lib",
        "no/such/lib.so")
      assert.are.equal(1, code)
      contains(err, "host library no/such/lib.so (--host-lib): no such file")
      code, _, err = ludo("run", "examples/echo", "--host-lib",
        ROOT .. "/spec/fixtures/hostlib/not-elf.so")
      assert.are.equal(1, code)
      contains(err, "not-elf.so (named by --host-lib): cannot load it: ")
      code, _, err = ludo("run", "examples/echo", "--host-lib",
        fixtures .. "hostlib-fails.so")
      assert.are.equal(1, code)
      contains(err, "hostlib-fails.so: ludo_host_init failed with EINVAL "
        .. "(-300): fixture could not register its module: EINVAL: host "
        .. "module name 'ludo.json' is reserved")
      code, _, err = ludo("run", "spec/fixtures/cli/manifest_missing")
      assert.are.equal(1, code)
      contains(err, "host library missing-host.so (named by "
        .. "spec/fixtures/cli/manifest_missing/manifest.json): no such file "
        .. "in spec/fixtures/cli/manifest_missing/ nor in ")
    end)

  it("refuse a malformed manifest, saying what is wrong", function()
    local cases = {
      { "manifest_badjson", "manifest.json: not valid JSON: " },
      { "manifest_unknown",
        "manifest.json: unknown field 'hostlib' (known: host_lib)" },
      { "manifest_type",
        "manifest.json: host_lib must be a non-empty file name or path" },
    }
    for _, c in ipairs(cases) do
      local code, _, err = ludo("run", "spec/fixtures/cli/" .. c[1])
      assert.are.equal(1, code, c[1])
      contains(err, "spec/fixtures/cli/" .. c[1] .. "/" .. c[2])
    end
  end)

  -- `ludo run ... --json --trace -`: its lines, decoded.
  local function traced_run(...)
    local json = require("ludo.json")
    local code, out, err = ludo("run", ...)
    assert.are.equal(0, code, err)
    local lines = {}
    for line in out:gmatch("[^\n]+") do
      lines[#lines + 1] = json.decode(line)
    end
    return lines
  end

  it("gives ludo run's policy the whole result in context.result, decoded "
    .. "when first read, with the observation it got", function()
      local prev, steps = nil, 0
      for _, r in ipairs(traced_run("examples/echo", "--seed", "3",
          "--max-steps", "4", "--policy",
          "spec/fixtures/eval/result_policy.lua", "--json", "--trace", "-")) do
        if r.step ~= nil then
          if r.step > 0 then
            local rubrics = prev.metadata and prev.metadata.rubrics
            assert.are.equal(("%d|%s|%s"):format(
              prev.observation.message_length, tostring(prev.reward),
              rubrics and tostring(rubrics.total) or "none"),
              r.action.message)
            steps = steps + 1
          end
          prev = r
        end
      end
      assert.are.equal(4, steps)
    end)

  it("let ludo run play the gridworld: its Lua policy takes a shortest "
    .. "path every episode", function()
      local shortest, episodes = {}, 0
      for _, r in ipairs(traced_run("examples/gridworld", "--seed", "5",
          "--episodes", "3", "--policy", "examples/gridworld/policy.lua",
          "--json", "--trace", "-")) do
        if r.step == 0 then
          shortest[r.episode] = r.observation.start_distance
        elseif r.total_reward then
          episodes = episodes + 1
          assert.is_true(r.done)
          assert.are.equal(shortest[r.episode], r.steps)
          -- 0.4 per step closer, 1.0 for the last (rubric.lua)
          assert.is_true(math.abs(r.total_reward - (0.4 * r.steps + 0.6))
            < 1e-9)
        end
      end
      assert.are.equal(3, episodes)
    end)
end)

describe("ludo run --strict", function()
  local ENV = "spec/fixtures/cli/offschema"

  it("is on by default: an observation off its schema fails the episode, "
    .. "naming the environment, the call and the field", function()
      for _, flags in ipairs({ {}, { "--strict" } }) do
        local code, out, err = ludo("run", ENV, "--seed", "1",
          table.unpack(flags))
        assert.are.equal(1, code)
        contains(out, "episode 1: FAILED after 1 steps: ESCHEMA: environment "
          .. "offschema: the observation of step does not match its "
          .. "declared schema: observation.pos.x: expected integer, got "
          .. "string")
        contains(err, "episode 1: step 2: ESCHEMA")
      end
      local code, out = ludo("run", ENV, "--seed", "7")
      assert.are.equal(1, code)
      contains(out, "FAILED after 0 steps: ESCHEMA: environment offschema: "
        .. "the observation of reset does not match its declared schema: "
        .. "observation: missing required field 'steps'")
    end)

  it("is off with --no-strict (the last of the two wins)", function()
    local code, out, err = ludo("run", ENV, "--seed", "1", "--no-strict")
    assert.are.equal(0, code, err)
    contains(out, "episode 1: 3 steps")
    code = ludo("run", ENV, "--seed", "1", "--no-strict", "--strict")
    assert.are.equal(1, code)
  end)

  it("lets observations that match through (echo, gridworld)", function()
    assert.are.equal(0, (ludo("run", "examples/echo", "--seed", "2",
      "--max-steps", "5")))
    assert.are.equal(0, (ludo("run", "examples/gridworld", "--seed", "2")))
  end)

  it("an error's text cannot forge ludo's lines or send terminal escapes",
    function()
      local code, out, err = ludo("run", "spec/fixtures/cli/forger")
      assert.are.equal(1, code)
      for _, text in ipairs({ out, err }) do
        assert.is_nil(text:find("\27", 1, true), text)
        assert.is_nil(text:find("\nepisode 9", 1, true), text)
      end
      contains(err, "ludo: episode 1: step 1: ESCRIPT: x\n    episode 9: 1 "
        .. "steps, total reward 100, done\\x1b[31mRED")
      contains(out, "episode 1: FAILED after 0 steps: ESCRIPT: x\n")
    end)

  it("a step returning nil fails its episode, naming the environment",
    function()
      for _, flag in ipairs({ "--strict", "--no-strict" }) do
        local code, out = ludo("run", "spec/fixtures/c/nilstep", flag)
        assert.are.equal(1, code)
        contains(out, "FAILED after 0 steps: ESCRIPT: step of environment "
          .. "forgetful returned nil (or nothing)")
      end
    end)
end)

describe("the gameloop example", function()
  it("runs a reset and 100 steps from its frame loop", function()
    local code, out, err = sh(quote(BUILD .. "/gameloop"))
    assert.are.equal(0, code, err)
    assert.are.equal("101 calls\n", out)
  end)

  it("stops and says why when a call fails", function()
    local code, _, err = sh(quote(BUILD .. "/gameloop") .. " "
      .. "spec/fixtures/c/nilstep")
    assert.are.equal(1, code)
    contains(err,
      "step of environment forgetful returned nil (or nothing)")
    code, _, err = sh(quote(BUILD .. "/gameloop") .. " /no/such/env")
    assert.are.equal(1, code)
    contains(err, "ludo: ENOENT: no environment at /no/such/env")
  end)

  it("is the code docs/embedding.md shows, line for line", function()
    local doc = slurp(ROOT .. "/docs/embedding.md")
    local src = slurp(ROOT .. "/examples/gameloop/main.c")
    local block = doc:match("\n```c\n(/%* gameloop:.-\n)```\n")
    assert.is_string(block, "no gameloop block in docs/embedding.md")
    assert.are.equal(src, block)
  end)
end)
