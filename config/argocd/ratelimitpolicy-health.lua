-- Argo CD health check for policy.ratelimit.dev/RateLimitPolicy.
-- Install as argocd-cm key resource.customizations.health.policy.ratelimit.dev_RateLimitPolicy
-- (config/argocd is a kustomize Component that does it). It needs no Lua library: Argo CD
-- runs argocd-cm scripts with only the base, table and a safe os library.
--
-- Healthy      Ready=True for the current generation: the spec compiles and this generation
--              is in its namespace's snapshot, so every sidecar enforces it. A Redis outage
--              does not change that (the sidecars apply the policy's failure mode); the
--              message says so, and ScriptsLoaded=False/RedisUnavailable shows it.
-- Degraded     Stalled=True (InvalidPolicy, SnapshotTooLarge, Conflicted): nothing changes until the
--              spec, or the namespace's policies, do. Also Ready=False for any reason not
--              listed under Progressing.
-- Progressing  no status yet, a generation the controller has not acted on yet,
--              Ready=False/Unknown while it publishes (PublishPending, Unknown), or while
--              a Gateway API target it is attached to does not exist yet (NotAttached).
local hs = {status = "Progressing", message = "Waiting for the controller to act on the policy"}
local generation = obj.metadata.generation or 0
local status = obj.status
if status == nil or status.conditions == nil then
  return hs
end
if (status.observedGeneration or 0) < generation then
  hs.message = "Waiting for the controller to act on generation " .. generation
  return hs
end

local ready, stalled
for _, c in ipairs(status.conditions) do
  -- A condition written for an older generation says nothing about this one.
  if (c.observedGeneration or generation) >= generation then
    if c.type == "Ready" then
      ready = c
    elseif c.type == "Stalled" then
      stalled = c
    end
  end
end

local function describe(c)
  local text = c.reason or ""
  if c.message ~= nil and c.message ~= "" then
    text = text .. ": " .. c.message
  end
  return text
end

if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(stalled)
  return hs
end
if ready == nil then
  return hs
end
hs.message = describe(ready)
if ready.status == "True" then
  hs.status = "Healthy"
elseif ready.status == "False" and ready.reason ~= "PublishPending" and ready.reason ~= "Unknown"
    and ready.reason ~= "NotAttached" then
  hs.status = "Degraded"
end
return hs
