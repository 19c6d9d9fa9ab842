-- Specs for ludo.class: extend, instantiation, super, is_instance, names.
local class = require("ludo.class")

describe("ludo.class", function()
  local Animal, Dog

  before_each(function()
    Animal = class.Object:extend("Animal")
    function Animal:init(name) self.name = name end
    function Animal:speak() return self.name .. " makes a sound" end
    Dog = Animal:extend("Dog")
    function Dog:init(name, breed)
      Dog.super.init(self, name)
      self.breed = breed
    end
    function Dog:speak() return self.name .. " barks" end
  end)

  it("calls init with the constructor arguments", function()
    local d = Dog("rex", "lab")
    assert.are.equal("rex", d.name)
    assert.are.equal("lab", d.breed)
  end)

  it("inherits and overrides methods", function()
    local Cat = Animal:extend("Cat")
    assert.are.equal("tom makes a sound", Cat("tom"):speak())
    assert.are.equal("rex barks", Dog("rex"):speak())
  end)

  it("exposes super", function()
    assert.are.equal(Animal, Dog.super)
    assert.are.equal(class.Object, Animal.super)
    assert.is_nil(class.Object.super)
  end)

  it("answers is_instance along the hierarchy", function()
    local d = Dog("rex")
    assert.is_true(class.is_instance(d, Dog))
    assert.is_true(class.is_instance(d, Animal))
    assert.is_true(class.is_instance(d, class.Object))
    assert.is_false(class.is_instance(Animal("x"), Dog))
    assert.is_false(class.is_instance({}, Dog))
    assert.is_false(class.is_instance(42, Dog))
    assert.is_false(class.is_instance(Dog, Dog))
  end)

  it("raises when is_instance is given something that is not a class",
    function()
      assert.has_error(function() class.is_instance(Dog("x"), {}) end,
        "class.is_instance: second argument is not a class")
    end)

  it("names classes and instances", function()
    assert.are.equal("Dog", Dog.__name)
    assert.are.equal("class Dog", tostring(Dog))
    assert.matches("^Dog: 0x%x+$", tostring(Dog("rex")))
    assert.is_true(class.is_class(Dog))
    assert.is_false(class.is_class(Dog("rex")))
    assert.are.equal(Dog, class.of(Dog("rex")))
  end)

  it("inherits metamethods, including ones first defined later", function()
    local Puppy = Dog:extend("Puppy")
    function Animal.__len() return 4 end
    assert.are.equal(4, #Dog("rex"))
    assert.are.equal(4, #Puppy("bit"))
    local Kitten = Animal:extend("Kitten")
    function Kitten.__len() return 3 end
    assert.are.equal(3, #Kitten("x"))
    assert.are.equal(4, #Animal("x"))
  end)

  it("lets a subclass override __tostring", function()
    function Dog.__tostring(d) return "Dog(" .. d.name .. ")" end
    assert.are.equal("Dog(rex)", tostring(Dog("rex")))
    assert.matches("^Animal: 0x", tostring(Animal("x")))
  end)

  it("checks extend's arguments", function()
    assert.has_error(function() Animal:extend() end,
      "class.extend: the class name must be a non-empty string, got nil")
    assert.has_error(function() Animal.extend({}, "X") end)
  end)

  it("lets a class replace raw instance creation with __new", function()
    local Counted = class.Object:extend("Counted")
    local made = 0
    function Counted.__new(cls)
      made = made + 1
      return setmetatable({ serial = made }, cls)
    end
    local Sub = Counted:extend("Sub")
    assert.are.equal(1, Counted().serial)
    assert.are.equal(2, Sub().serial)
    assert.is_true(class.is_instance(Sub(), Counted))
  end)
end)
