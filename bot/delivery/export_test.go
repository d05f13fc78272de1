package delivery

// FairOrder is fairOrder, for the tests of package delivery_test.
var FairOrder = fairOrder
