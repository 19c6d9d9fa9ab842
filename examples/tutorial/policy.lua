-- A policy for the quiz that forgets to carry: 8 + 2 gives "0".
return function(observation)
  return { answer = tostring((observation.a + observation.b) % 10) }
end
