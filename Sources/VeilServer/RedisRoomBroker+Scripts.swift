// The shared state in Redis, and the Lua scripts that change it. Each script runs atomically, and
// publishes what it changed to the nodes concerned from inside the script, so every node hears of
// the changes to its rooms in the order Redis made them.
//
//   veil:nodes            sorted set: node name → the time (ms, Redis's clock) its registration runs out
//   veil:room:<room>      hash: user → "<node>|<muted 0/1>"
//   veil:members:<node>   set: "<room> <user>" of the node's participants (names hold no space)
//   veil:node:<node>      the channel the node subscribes to
//
// Room, user and node names are limited to A–Z a–z 0–9 . _ - @ + ~ (`SignalingMessage.isValidName`),
// so '|' and ' ' separate them safely.

extension RedisRoomBroker {
    /// Helpers every script starts with.
    static let prelude = #"""
    local function now_ms()
      local t = redis.call('TIME')
      return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    local function split(value, separator)
      local at = string.find(value, separator, 1, true)
      return string.sub(value, 1, at - 1), string.sub(value, at + 1)
    end
    -- Whether `user`'s seat in the room at `key` is `node`'s.
    local function seated_on(key, user, node)
      local current = redis.call('HGET', key, user)
      return current and split(current, '|') == node
    end
    -- Publishes message to every node with a participant in the room, except `except`.
    local function notify(key, except, message)
      local text = cjson.encode(message)
      local seen = {}
      for _, value in ipairs(redis.call('HVALS', key)) do
        local node = split(value, '|')
        if node ~= except and not seen[node] then
          seen[node] = true
          redis.call('PUBLISH', 'veil:node:' .. node, text)
        end
      end
    end

    """#

    /// ARGV: node, time to live (ms), refuse if alive (1/0). Registers or refreshes the node;
    /// returns 1 when it was not registered (first start, or taken for dead, or Redis lost its data).
    static let register = prelude + #"""
    local node, ttl, exclusive = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
    local now = now_ms()
    local until_ = tonumber(redis.call('ZSCORE', 'veil:nodes', node) or '0')
    if exclusive and until_ > now then
      return redis.error_reply('node ' .. node .. ' is registered for ' .. (until_ - now) .. ' ms more: another veil serve runs under this name, or one stopped moments ago')
    end
    return redis.call('ZADD', 'veil:nodes', now + ttl, node)
    """#

    /// ARGV: room, user, node, limit, connection. Admits the user (taking over their seat on any
    /// node) within the room's limit across nodes, and tells the node, the seat's old node and the
    /// room's other nodes.
    static let admit = prelude + #"""
    local room, user, node, limit, connection = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
    local key = 'veil:room:' .. room
    local member = room .. ' ' .. user
    local current = redis.call('HGET', key, user)
    local resumed, muted = false, false
    if current then
      local old, m = split(current, '|')
      resumed, muted = true, m == '1'
      if old ~= node then
        redis.call('SREM', 'veil:members:' .. old, member)
        redis.call('PUBLISH', 'veil:node:' .. old, cjson.encode({t = 'replaced', room = room, user = user, node = node}))
      end
    elseif redis.call('HLEN', key) >= limit then
      redis.call('PUBLISH', 'veil:node:' .. node, cjson.encode({t = 'refused', room = room, user = user, c = connection,
        code = 'room_full', message = 'room ' .. room .. ' is full (' .. limit .. ' participants)'}))
      return 0
    end
    redis.call('HSET', key, user, node .. (muted and '|1' or '|0'))
    redis.call('SADD', 'veil:members:' .. node, member)
    local others = {}
    local all = redis.call('HGETALL', key)
    for i = 1, #all, 2 do
      if all[i] ~= user then
        local n, m = split(all[i + 1], '|')
        table.insert(others, {u = all[i], n = n, m = m == '1'})
      end
    end
    redis.call('PUBLISH', 'veil:node:' .. node, cjson.encode({t = 'admitted', room = room, user = user, c = connection,
      resumed = resumed, muted = muted, others = others}))
    notify(key, node, {t = 'joined', room = room, user = user, node = node, muted = muted, resumed = resumed})
    return 1
    """#

    /// ARGV: room, user, node, reason. The user leaves, if their seat is still this node's.
    static let leave = prelude + #"""
    local room, user, node, reason = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
    local key = 'veil:room:' .. room
    if not seated_on(key, user, node) then return 0 end
    redis.call('HDEL', key, user)
    redis.call('SREM', 'veil:members:' .. node, room .. ' ' .. user)
    notify(key, node, {t = 'left', room = room, user = user, reason = reason})
    return 1
    """#

    /// ARGV: room, user, node, muted (1/0).
    static let mute = prelude + #"""
    local room, user, node, muted = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
    local key = 'veil:room:' .. room
    if not seated_on(key, user, node) then return 0 end
    redis.call('HSET', key, user, node .. '|' .. muted)
    notify(key, node, {t = 'muted', room = room, user = user, muted = muted == '1'})
    return 1
    """#

    /// ARGV: node. For each room where the node has a seat, publishes the room's participants to the
    /// node ('state'), in Redis's order with the room's other changes: what it missed while away.
    static let state = prelude + #"""
    local node = ARGV[1]
    local seen = {}
    for _, member in ipairs(redis.call('SMEMBERS', 'veil:members:' .. node)) do
      local room = split(member, ' ')
      if not seen[room] then
        seen[room] = true
        local everyone = {}
        local all = redis.call('HGETALL', 'veil:room:' .. room)
        for i = 1, #all, 2 do
          local n, m = split(all[i + 1], '|')
          table.insert(everyone, {u = all[i], n = n, m = m == '1'})
        end
        redis.call('PUBLISH', 'veil:node:' .. node, cjson.encode({t = 'state', room = room, others = everyone}))
      end
    end
    return 1
    """#

    /// No arguments. Every node whose registration has run out is taken for dead: its participants
    /// leave their rooms (`timeout`), and the other nodes there are told. Returns the dead nodes' names.
    static let reap = prelude + #"""
    local dead = redis.call('ZRANGEBYSCORE', 'veil:nodes', '-inf', now_ms())
    for _, node in ipairs(dead) do
      redis.call('ZREM', 'veil:nodes', node)
      for _, member in ipairs(redis.call('SMEMBERS', 'veil:members:' .. node)) do
        local room, user = split(member, ' ')
        local key = 'veil:room:' .. room
        local current = redis.call('HGET', key, user)
        if current and split(current, '|') == node then
          redis.call('HDEL', key, user)
          notify(key, node, {t = 'left', room = room, user = user, reason = 'timeout'})
        end
      end
      redis.call('DEL', 'veil:members:' .. node)
    end
    return dead
    """#
}
